//! `cancel`, `retry` and `delete-finished`: actions on one task or on every task of a filter.

use std::time::Duration;

use anyhow::Result;
use clap::{ArgGroup, Args, ValueEnum};
use taskhost::store::{BulkFilter, Finished, Replay, Unfinished};
use taskhost::text::count;
use taskhost::App;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).multiple(true).args(["ids", "queue", "handler", "all"])))]
pub struct CancelArgs {
    /// The tasks' ids.
    pub ids: Vec<i64>,
    /// Every unfinished task of this queue.
    #[arg(long, conflicts_with = "ids")]
    pub queue: Option<String>,
    /// Every unfinished task of this handler.
    #[arg(long, conflicts_with = "ids")]
    pub handler: Option<String>,
    /// Only tasks in this state: scheduled (not running: waiting for a run, a retry, a signal or
    /// the tasks it runs after; `waiting` says the same) or running.
    #[arg(long, value_enum, conflicts_with = "ids")]
    pub status: Option<CancelStatus>,
    /// Every unfinished task of every queue.
    #[arg(long, conflicts_with_all = ["ids", "queue", "handler"])]
    pub all: bool,
    /// With the tasks' ids: every unfinished task under them too (their children, the children's
    /// children, ...), a finished task's included.
    #[arg(long, requires = "ids")]
    pub with_children: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CancelStatus {
    #[value(alias = "waiting")]
    Scheduled,
    Running,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The finished task's id (dead, cancelled, or succeeded: it runs again).
    #[arg(required_unless_present_any = ["all_dead", "all_cancelled"], conflicts_with_all = ["all_dead", "all_cancelled"])]
    pub id: Option<i64>,
    /// Replace the task's data before replaying it (JSON; @FILE reads a file, - standard input).
    #[arg(long, requires = "id")]
    pub data: Option<String>,
    /// Replay every dead letter (of --queue and --handler, when given).
    #[arg(long, conflicts_with = "all_cancelled")]
    pub all_dead: bool,
    /// Replay every cancelled task (of --queue and --handler, when given).
    #[arg(long)]
    pub all_cancelled: bool,
    /// With --all-dead or --all-cancelled: only this queue's.
    #[arg(long, conflicts_with = "id")]
    pub queue: Option<String>,
    /// With --all-dead or --all-cancelled: only this handler's.
    #[arg(long, conflicts_with = "id")]
    pub handler: Option<String>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Only tasks that succeeded.
    #[arg(long, conflicts_with_all = ["dead", "cancelled"])]
    pub succeeded: bool,
    /// Only cancelled tasks.
    #[arg(long, conflicts_with = "dead")]
    pub cancelled: bool,
    /// Only dead letters.
    #[arg(long)]
    pub dead: bool,
    /// Only this queue's.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this handler's.
    #[arg(long)]
    pub handler: Option<String>,
    /// Only tasks finished longer ago than this (e.g. 7d, 12h).
    #[arg(long, value_parser = taskhost::text::parse_duration, default_value = "0s")]
    pub older_than: Duration,
}

pub async fn cancel(app: &App, c: CancelArgs) -> Result<()> {
    if c.ids.is_empty() {
        let which = match c.status {
            None => Unfinished::Any,
            Some(CancelStatus::Scheduled) => Unfinished::Waiting,
            Some(CancelStatus::Running) => Unfinished::Running,
        };
        let done =
            app.client.cancel_matching(&BulkFilter { queue: c.queue, handler: c.handler, ids: None }, which).await?;
        let running = match done.running {
            1 => "1 was running: its worker stops it".to_string(),
            n => format!("{n} were running: their workers stop them"),
        };
        println!("{} cancelled ({running})", count(done.tasks, "task"));
        return Ok(());
    }
    let done = match c.with_children {
        true => app.client.cancel_with_children(&c.ids).await?,
        false => app.client.cancel(&c.ids).await?,
    };
    let mut refused = 0;
    for id in &c.ids {
        if done.contains(id) {
            println!("task {id} cancelled");
            continue;
        }
        if c.with_children {
            // Finished itself: what is under it was sought all the same.
            if let Ok((task, _)) = app.client.show(*id).await {
                println!("task {id} was {} already", task.state);
                continue;
            }
        }
        refused += 1;
        match app.client.show(*id).await {
            Ok((task, _)) => {
                eprintln!("error: task {id} is {}: only unfinished tasks can be cancelled", task.state)
            }
            Err(e) => eprintln!("error: {e}"),
        }
    }
    if c.with_children {
        let under = done.iter().filter(|id| !c.ids.contains(id)).count();
        println!("{} under them cancelled", count(under as u64, "task"));
    }
    if refused > 0 {
        return Err(super::Reported.into());
    }
    Ok(())
}

pub async fn retry(app: &App, r: RetryArgs) -> Result<()> {
    let filter = BulkFilter { queue: r.queue, handler: r.handler, ids: None };
    if r.all_dead {
        println!("{} scheduled again", count(app.client.replay(Replay::Dead, &filter).await?, "dead letter"));
    } else if r.all_cancelled {
        println!("{} scheduled again", count(app.client.replay(Replay::Cancelled, &filter).await?, "cancelled task"));
    } else if let Some(id) = r.id {
        let attempt = match &r.data {
            Some(data) => app.client.retry_with_data(id, &super::read_data(data)?).await?,
            None => app.client.retry(id).await?,
        };
        println!("task {id} scheduled again, as attempt {attempt}");
    }
    Ok(())
}

pub async fn delete_finished(app: &App, d: DeleteArgs) -> Result<()> {
    let which = match (d.succeeded, d.cancelled, d.dead) {
        (true, _, _) => Finished::Succeeded,
        (_, true, _) => Finished::Cancelled,
        (_, _, true) => Finished::Dead,
        _ => Finished::Any,
    };
    let filter = BulkFilter { queue: d.queue, handler: d.handler, ids: None };
    let n = app.client.delete_finished(which, &filter, d.older_than).await?;
    println!("{} deleted", count(n, "finished task"));
    Ok(())
}
