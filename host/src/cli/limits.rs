//! `taskhost limits ...`: flow-control limits kept in the database, changed live.

use anyhow::Result;
use clap::Subcommand;
use taskhost::model::{LimitChange, OnSuccess};
use taskhost::App;

use crate::output;

#[derive(Debug, Subcommand)]
pub enum LimitsCommand {
    /// List the limits: runs in flight at most, starts per period, caps and rates per key, keys' weights,
    /// who set each and when, and each one's runs in flight and due tasks now.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set a limit live, for every worker within a second (a worker's start does not overwrite
    /// it from its file). What is not given stays; `none` takes a value out.
    Set {
        /// queue:NAME, handler:NAME or key:NAME.
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
        /// A queue's runs in flight of each key at once (1 to 1,000,000; none: no limit).
        #[arg(long, value_name = "N|none")]
        max_running_per_key: Option<String>,
        /// A queue's starts per period of each key, each key paced apart: 5/1s (none: no limit).
        #[arg(long, value_name = "N/PERIOD|none")]
        rate_per_key: Option<String>,
        /// With a rate per key: starts each key may take at once beyond its pace.
        #[arg(long, value_name = "N")]
        burst_per_key: Option<u32>,
        /// A key's weight: its turns to a weight-1 key's one (1 to 1,000; none: 1).
        #[arg(long, value_name = "N|none")]
        weight: Option<String>,
        /// A queue's fuel a turn of a key buys: each key's turns spaced by the fuel its runs
        /// burn (1,000,000 to 10^15; none: turns counted by tasks).
        #[arg(long, value_name = "N|none")]
        fuel_per_turn: Option<String>,
        /// What a queue's successes do with their tasks: keep them (as by default), or delete
        /// them where nothing reads them again, a narrow record of each end kept instead.
        #[arg(long, value_name = "delete|keep", value_parser = OnSuccess::parse)]
        on_success: Option<OnSuccess>,
    },
    /// Take a limit out (a worker started later with it in its file sets it again).
    Clear {
        /// queue:NAME, handler:NAME or key:NAME.
        name: String,
    },
}

/// A `--flag N|none` value: Some(None) for none.
fn count_or_none(flag: &str, value: Option<&str>, max: u32) -> Result<Option<Option<u32>>> {
    match value {
        None => Ok(None),
        Some("none") => Ok(Some(None)),
        Some(n) => match n.parse::<u32>() {
            Ok(n) => Ok(Some(Some(n))),
            Err(_) => anyhow::bail!("--{flag} {n}: write a whole number from 1 to {max}, or none"),
        },
    }
}

/// `--fuel-per-turn N|none`: Some(None) for none (the range is checked where it is set).
fn fuel_or_none(value: Option<&str>) -> Result<Option<Option<u64>>> {
    match value {
        None => Ok(None),
        Some("none") => Ok(Some(None)),
        Some(n) => match n.replace('_', "").parse::<u64>() {
            Ok(n) => Ok(Some(Some(n))),
            Err(_) => anyhow::bail!("--fuel-per-turn {n}: write a whole number from 1000000 to 10^15, or none"),
        },
    }
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
        LimitsCommand::Set {
            name,
            max_running,
            rate,
            burst,
            max_running_per_key,
            rate_per_key,
            burst_per_key,
            weight,
            fuel_per_turn,
            on_success,
        } => {
            let change = LimitChange {
                max_running: count_or_none("max-running", max_running.as_deref(), 1_000_000)?,
                rate_limit: rate.map(|r| (r != "none").then_some(r)),
                rate_burst: burst,
                max_running_per_key: count_or_none("max-running-per-key", max_running_per_key.as_deref(), 1_000_000)?,
                rate_limit_per_key: rate_per_key.map(|r| (r != "none").then_some(r)),
                rate_burst_per_key: burst_per_key,
                weight: count_or_none("weight", weight.as_deref(), 1_000)?,
                fuel_per_turn: fuel_or_none(fuel_per_turn.as_deref())?,
                on_success,
            };
            let now = app.client.set_limit(&name, &change).await?;
            match now.is_some() {
                true => println!("limit {name} set: {}; every worker applies it within a second", output::limit_summary(&now)),
                // Nothing of it is left: as `limits clear`.
                false => println!("limit {name} set: nothing is limited there now (as by default); every worker applies it within a second"),
            }
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
