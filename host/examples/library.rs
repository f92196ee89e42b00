//! taskhost as a library: queue a task, run a worker until nothing is due, read the outcome.
//! `cargo run --release --example library` after `make plugins` (it uses target/plugins).

use taskhost::runner::WorkerConfig;
use taskhost::{App, AppConfig, NewTask};

#[tokio::main]
async fn main() -> Result<(), taskhost::Error> {
    let app = App::open(&AppConfig::new("sqlite://target/library-example.db", "target/plugins")).await?;
    let task = NewTask::new("word-count", r#"{"text": "a b c"}"#).with_priority(-1);
    let added = app.client.add(task).await?;
    // The worker stops when its shutdown future completes, or (drain) once nothing is due.
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let report = app.worker(WorkerConfig { drain: true, ..Default::default() }).run(shutdown).await?;
    let (task, runs) = app.client.show(added.id).await?;
    let results = runs.last().and_then(|r| r.results.as_deref()).unwrap_or("none");
    println!("{} runs finished; task {} is {}: {results}", report.runs_finished, task.id, task.last_status);
    Ok(())
}
