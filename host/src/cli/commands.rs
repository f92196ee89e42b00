//! The commands that act on the queue through the client, one function each (`list`, the bulk
//! actions and schedules have files of their own).

use anyhow::{Context, Result};
use taskhost::model::{NewTask, TaskFilter, TaskState};
use taskhost::overseer::{Overseer, OverseerConfig};
use taskhost::runner::WorkerConfig;
use taskhost::App;

use super::{read_data, reload_on_hangup, serve_metrics, AddArgs, LogFormat, WorkerArgs};
use crate::output;
use crate::shutdown::shutdown_signal;

/// `add`: one task, or (`--many`) many from a file or standard input.
pub async fn add(app: &App, a: AddArgs) -> Result<()> {
    if let Some(path) = &a.many {
        let text = read_data(&if path == "-" { "-".to_string() } else { format!("@{path}") })?;
        return super::many::add_many(app, path, &text).await;
    }
    let handler = a.handler.context("a handler or --many is needed")?;
    // Given, even as the default: the task's own check sees only states other than it.
    if a.unique_states.is_some() && a.unique_key.is_none() {
        anyhow::bail!("invalid unique_key: a unique period or states need a unique key");
    }
    let mut t = NewTask::new(handler, read_data(&a.data)?)
        // The new name first, wherever it comes from (a flag or the file), then the old one.
        .with_max_attempts(
            a.max_attempts.or(a.max_retries.map(|n| n.max(1))).unwrap_or(taskhost::model::DEFAULT_MAX_ATTEMPTS),
        )
        .with_queue(a.queue)
        .with_priority(a.priority);
    t.queued_by = a.queued_by;
    t.key = a.key;
    t.unique_key = a.unique_key;
    t.unique_for = a.unique_for;
    t.unique_states = a.unique_states.unwrap_or_default();
    t.run_timeout = a.run_timeout;
    t.after = a.after;
    t.run_anyway = a.run_anyway;
    t.version = a.version.as_deref().map(taskhost::model::version_text);
    t.scheduled_on = match (a.at, a.in_) {
        (Some(at), _) => Some(at),
        (None, Some(d)) => Some(app.client.now() + chrono::Duration::from_std(d).context("--in is too large")?),
        (None, None) => None,
    };
    let added = app.client.add(t).await?;
    println!("{}", added.id);
    if !added.created {
        eprintln!("a task holding that unique key exists already: task {}", added.id);
    }
    Ok(())
}

/// `worker`: work until a signal (or, with `--drain`, until nothing is left).
pub async fn worker(app: &App, w: WorkerArgs, overseer: OverseerConfig, log_format: LogFormat) -> Result<()> {
    reload_on_hangup(app);
    // A worker that can run nothing would only turn every task it claims into a dead letter: a
    // wrong --plugins is refused at start, unless handlers are deployed into the database.
    if let Err(e) = app.catalog.check_dir() {
        if !app.store.release_mark().await.is_ok_and(|mark| mark > 0) {
            return Err(e.into());
        }
        tracing::info!("{e}: running the handlers deployed into the database alone");
    }
    if w.queues.len() > 1 && w.queues.iter().any(|q| q == taskhost::model::EVERY_QUEUE) {
        anyhow::bail!("--queues: * (every queue) cannot be listed with queue names");
    }
    if let Some(addr) = w.metrics {
        serve_metrics(app, addr).await?;
    }
    let cfg = WorkerConfig {
        concurrency: w.concurrency,
        claim_batch: w.claim_batch.max(1),
        queues: w.queues,
        drain: w.drain,
        drain_horizon: w.drain_horizon,
        heartbeat_horizon: overseer.liveness.heartbeat_horizon,
        overseer: (!w.no_overseer).then_some(overseer),
        watch_plugins: (!w.watch_plugins.is_zero()).then_some(w.watch_plugins),
        poll_interval: w.poll_interval,
        notified_poll_interval: w.notified_poll_interval,
        probe_interval: w.probe_interval,
        heartbeat_interval: w.heartbeat_interval,
        shutdown_grace: w.shutdown_grace,
        memory_budget_bytes: w.memory_budget_mb.map(|m| m.saturating_mul(1 << 20)),
        rss_cap_bytes: w.rss_cap_mb.map(|m| m.saturating_mul(1 << 20)),
        runner_limit: w.runner_limit,
        require_plugins: true,
        ..WorkerConfig::default()
    };
    let r = app.worker(cfg).run(shutdown_signal()).await?;
    let failed = r.runs_finished.saturating_sub(r.runs_succeeded + r.runs_snoozed);
    let snoozed = if r.runs_snoozed > 0 { format!("{} snoozed, ", r.runs_snoozed) } else { String::new() };
    // In JSON, the `worker stopped` log line carries the same counts.
    if log_format == LogFormat::Text {
        eprintln!(
            "runner {} stopped ({:?}): {} runs finished ({} succeeded, {snoozed}{failed} failed), {} abandoned",
            r.runner_id, r.exit, r.runs_finished, r.runs_succeeded, r.runs_abandoned
        );
    }
    Ok(())
}

/// `overseer`: its services until a signal, or (`--once`) each once.
pub async fn overseer(app: &App, mut config: OverseerConfig, once: bool, apply: bool) -> Result<()> {
    config.schedules.apply = !once || apply;
    let overseer = Overseer::new(app.store.clone(), app.clock.clone(), config);
    if once {
        for (name, summary) in overseer.run_all_once().await? {
            println!("{name}: {}", summary.unwrap_or_else(|| "nothing to do".into()));
        }
        return Ok(());
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    let handle = tokio::spawn(overseer.run_until(rx));
    shutdown_signal().await;
    let _ = tx.send(true);
    let _ = handle.await;
    Ok(())
}

/// `show ID`: a task and its runs.
pub async fn show(app: &App, id: i64, json: bool) -> Result<()> {
    let (task, runs) = app.client.show(id).await?;
    let after = app.client.dependencies(id).await?;
    if json {
        let signals = app.client.signals(id).await?;
        let detail = taskhost::model::TaskDetail::new(task, runs).with_after(after).with_signals(signals);
        println!("{}", serde_json::to_string_pretty(&detail)?);
    } else {
        print!("{}", output::task_detail(&task, &runs));
        if !after.is_empty() {
            let shown: Vec<String> = after.iter().map(|d| format!("{} ({})", d.id, d.state)).collect();
            let waiting = match task.state == TaskState::Waiting && task.waiting_for > 0 {
                true => format!(": waiting for {}", task.waiting_for),
                false => String::new(),
            };
            println!("runs after  {}{waiting}", shown.join(", "));
        }
        // The first of its children, by id: `list --parent ID` lists them all.
        let first = TaskFilter { parent: Some(id), limit: Some(11), newest_first: false, ..TaskFilter::default() };
        let children = app.client.list(&first).await?;
        if !children.is_empty() {
            let shown: Vec<String> = children.iter().take(10).map(|c| format!("{} ({})", c.id, c.state)).collect();
            let more = if children.len() > 10 { format!(", … (taskhost list --parent {id})") } else { String::new() };
            println!("children    {}{more}", shown.join(", "));
        }
        print!("{}", output::signals(&task, &app.client.signals(id).await?));
    }
    Ok(())
}

/// `signal ID NAME --data JSON`.
pub async fn signal(app: &App, id: i64, name: &str, data: &str) -> Result<()> {
    let data = read_data(data)?;
    // Checked as task data is, but named as what it is.
    let sent = app.client.signal(id, name, &data).await.map_err(|e| match e {
        taskhost::Error::InvalidJson(reason) => anyhow::anyhow!("the signal's data is not valid JSON: {reason}"),
        other => other.into(),
    })?;
    let name = taskhost::text::one_line(name);
    match sent.woke {
        true => println!("signal {name:?} sent to task {id}, which awaited it: due now"),
        false => println!("signal {name:?} sent to task {id}: kept until a run of it waits for it"),
    }
    Ok(())
}

/// `queues --keys`: the keys with unfinished tasks, the longest-waiting first.
pub async fn keys(app: &App, queue: Option<&str>, limit: u32, json: bool) -> Result<()> {
    let keys = app.client.keys(queue, limit).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&keys)?);
    } else {
        print!("{}", output::key_table(&keys, app.client.now()));
    }
    Ok(())
}

/// `queues`: every queue with tasks or paused.
pub async fn queues(app: &App, json: bool) -> Result<()> {
    let queues = app.client.queues().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&queues)?);
    } else {
        print!("{}", output::queue_table(&queues, app.client.now()));
    }
    for q in queues.iter().filter(|q| q.due > 0 && q.paused_on.is_none() && q.served_by == 0) {
        eprintln!(
            "warning: queue {} has {} due and no live worker claims from it: start one with --queues {0}, or with none for every queue",
            q.name,
            taskhost::text::count(q.due, "task")
        );
    }
    Ok(())
}

/// `pause QUEUE`.
pub async fn pause(app: &App, queue: &str) -> Result<()> {
    let known = app.client.queues().await?.iter().any(|q| q.name == queue);
    if !app.client.pause_queue(queue).await? {
        println!("queue {queue} was paused already");
        return Ok(());
    }
    println!("queue {queue} paused: workers claim nothing more from it");
    if !known {
        eprintln!(
            "note: queue {queue} holds no unfinished task (`taskhost queues` lists those that do): is the name right?"
        );
    }
    Ok(())
}

/// `resume QUEUE`.
pub async fn resume(app: &App, queue: &str) -> Result<()> {
    if app.client.resume_queue(queue).await? {
        println!("queue {queue} resumed");
    } else {
        println!("queue {queue} was not paused");
    }
    Ok(())
}

/// `stats`: runs per handler.
pub async fn stats(app: &App, handler: Option<String>, queue: Option<String>, json: bool) -> Result<()> {
    let stats = app.client.stats(handler.as_deref(), queue.as_deref()).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else {
        print!("{}", output::stats_table(&stats));
    }
    Ok(())
}
