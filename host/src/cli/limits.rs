//! `taskhost limits ...`: flow-control limits kept in the database, changed live.

use anyhow::Result;
use clap::Subcommand;
use taskhost::model::LimitChange;
use taskhost::App;

use crate::output;

#[derive(Debug, Subcommand)]
pub enum LimitsCommand {
    /// List the limits: runs in flight at most, starts per period, who set each and when, and
    /// each one's runs in flight and due tasks now.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set a limit live, for every worker within a second (a worker's start does not overwrite
    /// it from its file). What is not given stays; `none` takes a value out.
    Set {
        /// queue:NAME or handler:NAME.
        name: String,
        /// Runs in flight at once, on all workers together (1 to 1,000,000; none: no limit).
        #[arg(long, value_name = "N|none")]
        max_running: Option<String>,
        /// Starts per period, on all workers together: 5/1s, 100/1m (none: no limit).
        #[arg(long, value_name = "N/PERIOD|none")]
        rate: Option<String>,
        /// With a rate: starts allowed at once beyond its pace, after a quiet spell.
        #[arg(long, value_name = "N")]
        burst: Option<u32>,
    },
    /// Take a limit out (a worker started later with it in its file sets it again).
    Clear {
        /// queue:NAME or handler:NAME.
        name: String,
    },
}

pub async fn run(app: &App, command: LimitsCommand) -> Result<()> {
    match command {
        LimitsCommand::List { json } => {
            let limits = app.client.limits().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&limits)?);
            } else {
                print!("{}", output::limit_table(&limits));
            }
        }
        LimitsCommand::Set { name, max_running, rate, burst } => {
            let max_running = match max_running.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(n) => Some(Some(n.parse::<u32>().map_err(|_| {
                    anyhow::anyhow!("--max-running {n}: write a whole number from 1 to 1000000, or none")
                })?)),
            };
            let rate_limit = rate.map(|r| (r != "none").then_some(r));
            let change = LimitChange { max_running, rate_limit, rate_burst: burst };
            let now = app.client.set_limit(&name, &change).await?;
            let show = |v: Option<String>| v.unwrap_or_else(|| "none".into());
            println!(
                "limit {name} set: max running {}, rate {}; every worker applies it within a second",
                show(now.max_running.map(|n| n.to_string())),
                show(now.rate.map(|r| r.to_string()))
            );
        }
        LimitsCommand::Clear { name } => {
            if app.client.clear_limit(&name).await? {
                println!("limit {name} taken out");
            } else {
                println!("no limit {name} was set");
            }
        }
    }
    Ok(())
}
