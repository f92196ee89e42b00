//! `taskhost migrate`: the tables, and what the operator's file tells the database's own functions.

use anyhow::{Context, Result};
use taskhost::{App, AppConfig};

/// Create or update the tables, saying which migrations were applied.
pub(super) async fn migrate(config: &AppConfig) -> Result<()> {
    let options =
        taskhost::store::StoreOptions { migrate: false, connect_timeout: config.connect_timeout, ..Default::default() };
    let store = taskhost::store::open(&config.database_url, &options).await?;
    let applied = store.migrate().await?;
    let limit = App::tell_sql_data_limit(&*store, config.policy.max_data_bytes).await;
    if applied.is_empty() {
        println!("database is up to date");
    }
    for m in applied {
        println!("applied {m}");
    }
    if let Some(said) = limit {
        println!("{said}");
    }
    // Only here: it is DDL, which waits for callers' transactions holding the tasks' table.
    let deployed_only = config.policy.sql_add_handlers == taskhost::config::SqlAddHandlers::Deployed;
    let checked = store.set_sql_add_handlers(deployed_only).await.with_context(|| {
        format!(
            "[tasks] sql_add_handlers = {:?}: changing the database's check of handlers queued in SQL failed",
            if deployed_only { "deployed" } else { "any" }
        )
    })?;
    match (checked, deployed_only) {
        (false, _) => {}
        (true, true) => println!(
            "taskhost_add now refuses a handler not deployed into the database ([tasks] sql_add_handlers = \"deployed\")"
        ),
        (true, false) => println!("taskhost_add now takes any handler ([tasks] sql_add_handlers = \"any\")"),
    }
    Ok(())
}
