//! Controlling a live queue through the library and the `taskhost` command: pausing and resuming
//! a queue on every database (a paused queue is not claimed, across restarts: it is a row; a
//! resumed one runs again), concurrency limits across worker processes, cancelling, and the
//! bulk actions (their store part is in the store suite).

use crate::common;

use std::time::Duration;

use common::process::{run, spawn_worker, stderr, stdout, wait_exit};
use common::{drain_config, Db, Env};
use taskhost::model::{NewTask, RunStatus, TaskFilter};
use taskhost::runner::WorkerConfig;

async fn a_paused_queue_is_not_claimed_until_resumed(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let client = &env.app.client;
    let mail: Vec<i64> = client
        .add_many(vec![NewTask::new("echo", "{}").with_queue("mail"), NewTask::new("echo", "{}").with_queue("mail")])
        .await
        .expect("add")
        .iter()
        .map(|a| a.id)
        .collect();
    let other = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    assert!(client.pause_queue("mail").await.expect("pause"), "newly paused");
    assert!(!client.pause_queue("mail").await.expect("pause"), "paused already");
    let queues = client.queues().await.expect("queues");
    let q = queues.iter().find(|q| q.name == "mail").expect("mail listed");
    assert_eq!((q.due, q.running, q.paused_on.is_some()), (2, 0, true), "{queues:?}");
    assert!(q.oldest_due.is_some());

    // A draining worker of both queues runs the other queue's task and leaves the paused ones.
    let cfg = WorkerConfig { queues: vec!["default".into(), "mail".into()], ..drain_config() };
    let report = env.drain(cfg.clone()).await;
    assert_eq!(report.runs_finished, 1);
    assert_eq!(client.show(other).await.expect("show").0.last_status, RunStatus::Success);
    // Another process (a restart) sees the pause too: it is kept in the database.
    let again = env.second_app().await;
    assert_eq!(common::drain_app(&again, cfg.clone()).await.runs_finished, 0);
    for id in &mail {
        assert_eq!(client.show(*id).await.expect("show").0.last_status, RunStatus::Scheduled);
    }

    assert!(client.resume_queue("mail").await.expect("resume"));
    assert!(!client.resume_queue("mail").await.expect("resume"), "not paused any more");
    assert_eq!(env.drain(cfg).await.runs_finished, 2);
    for id in &mail {
        assert_eq!(client.show(*id).await.expect("show").0.last_status, RunStatus::Success);
    }
    assert!(
        client.queues().await.expect("queues").iter().all(|q| q.name != "mail"),
        "an empty, running queue is not listed"
    );
}

/// Three worker processes share a queue limited to 2 runs in flight and a handler limited to
/// 3 (across its queues): sampled all along, the database never shows more, the limits are
/// reached, and the unlimited tasks run beside them.
async fn limits_hold_across_worker_processes(db: Db) {
    let mut env = Env::on(db, &["spin", "echo"]).await;
    // Runs of a second, so that both limits fill up.
    env.set_config(
        "[handlers.spin]\nmax_running = 3\n[handlers.spin.limits]\ndeadline = \"1s\"\n\
         fuel = 1_000_000_000_000_000\n[queues.api]\nmax_running = 2\n",
    )
    .await;
    let client = &env.app.client;
    let mut tasks = Vec::new();
    for _ in 0..6 {
        tasks.push(NewTask::new("spin", "{}").with_queue("api").with_max_attempts(1));
        tasks.push(NewTask::new("spin", "{}").with_queue("bulk").with_max_attempts(1));
        tasks.push(NewTask::new("echo", "{}").with_queue("bulk"));
    }
    client.add_many(tasks).await.expect("add");
    let args = ["--concurrency", "4", "--queues", "api,bulk", "--drain"];
    let workers: Vec<_> = (0..3).map(|_| spawn_worker(&env, &args)).collect();
    for w in workers {
        let o = wait_exit(w, Duration::from_secs(180)).await;
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // How many ran at once, from each run's execution as the database holds it: from its end
    // back by its duration (measured by its worker from after the claim returned, to the guest's
    // end: within the time the run counted as in flight, so no false alarm) — a count that cannot
    // miss a moment, as sampling could. (`started_on` is not used: it is the time the claim was
    // asked, before it waited for the limits' locks.)
    let (mut api, mut spin) = (Vec::new(), Vec::new());
    for task in client.list(&TaskFilter::default()).await.expect("list") {
        let runs = env.app.store.runs_of(task.id).await.expect("runs");
        // Each worker process keeps the database's time by its own estimate of the skew, so two
        // processes' times of one moment differ by a few ms, more under load: a run that took a
        // slot freed a moment before by another process could seem to overlap it. A run past a
        // limit would overlap others for most of its second; one of 100 ms is a clock's error.
        let spans = runs.iter().filter_map(|r| {
            let end = r.finished_on?;
            Some((end - chrono::Duration::milliseconds(r.duration_ms?) + CLOCKS_APART, end))
        });
        if task.queue == "api" {
            api.extend(spans.clone());
        }
        if task.handler == "spin" {
            spin.extend(spans);
        }
    }
    let (api_max, spin_max) = (most_at_once(&api), most_at_once(&spin));
    eprintln!("at most {api_max} runs of the api queue and {spin_max} of spin were seen in flight");
    assert_eq!((api_max, spin_max), (2, 3), "the limits are reached and never passed");
    let counts = env.app.store.counts().await.expect("counts");
    assert_eq!((counts.scheduled, counts.running, counts.success, counts.dead), (0, 0, 6, 12), "{counts:?}");
    // `taskhost queues` shows each queue's limit.
    let text = stdout(&run(&env, &["queues"]));
    let api = text.lines().find(|l| l.starts_with("api ")).unwrap_or_default();
    assert!(text.contains("MAX RUNNING") && api.split_whitespace().nth(4) == Some("2"), "{text}");
}

/// How far apart two worker processes' times of one moment may be (see its use).
const CLOCKS_APART: chrono::Duration = chrono::Duration::milliseconds(100);

/// The most intervals `[start, end)` that overlap at one moment (an end at the moment another
/// starts frees its place first).
fn most_at_once(spans: &[(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)]) -> usize {
    let mut edges: Vec<_> = spans.iter().flat_map(|(s, e)| [(*s, 1i32), (*e, -1)]).collect();
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

on_every_database!(a_paused_queue_is_not_claimed_until_resumed, limits_hold_across_worker_processes);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taskhost_pause_queues_and_resume_as_a_user_runs_them() {
    let env = Env::new(&["echo"]).await;
    let o = run(&env, &["add", "echo", "--queue", "mail"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&env, &["pause", "mail"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "queue mail paused: workers claim nothing more from it\n");
    assert_eq!(stdout(&run(&env, &["pause", "mail"])), "queue mail was paused already\n");
    let text = stdout(&run(&env, &["queues"]));
    let header = text.lines().next().unwrap_or_default();
    assert!(header.contains("DUE") && header.contains("LAG") && header.contains("PAUSED"), "{text}");
    let mail = text.lines().find(|l| l.starts_with("mail")).unwrap_or_default();
    assert!(mail.contains(" 1 ") && mail.contains("paused since"), "{text}");
    let o = run(&env, &["worker", "--drain", "--queues", "mail"]);
    assert!(o.status.success() && stderr(&o).contains("0 runs finished"), "{}", stderr(&o));
    let o = run(&env, &["resume", "mail"]);
    assert_eq!(stdout(&o), "queue mail resumed\n");
    let o = run(&env, &["worker", "--drain", "--queues", "mail"]);
    assert!(stderr(&o).contains("1 runs finished (1 succeeded"), "{}", stderr(&o));
    let shown: serde_json::Value = serde_json::from_slice(&run(&env, &["queues", "--json"]).stdout).expect("json");
    assert_eq!(shown, serde_json::json!([]), "nothing left, nothing paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_replayed_edited_and_deleted_from_the_command_line() {
    let env = Env::new(&["fail", "echo"]).await;
    let final_failure = r#"{"retryable": false}"#;
    let ids: Vec<i64> = (0..3).map(|_| common::process::add(&env, &["fail", "--data", final_failure])).collect();
    let echo = common::process::add(&env, &["echo"]);
    let counts = || async { env.app.store.counts().await.expect("counts") };
    let o = run(&env, &["worker", "--drain"]);
    let c = counts().await;
    assert_eq!((c.success, c.dead, c.scheduled), (1, 3, 0), "{c:?} {}", stderr(&o));
    let o = run(&env, &["retry", "--all-dead", "--handler", "fail"]);
    assert_eq!(stdout(&o), "3 dead letters scheduled again\n", "{}", stderr(&o));
    assert_eq!(counts().await.scheduled, 3);
    let o = run(&env, &["worker", "--drain"]);
    let c = counts().await;
    assert_eq!((c.success, c.dead, c.scheduled), (1, 3, 0), "{c:?} {}", stderr(&o));
    let id = ids[0].to_string();
    let o = run(&env, &["retry", &id, "--data", r#"{"retryable": false, "fixed": 1}"#]);
    assert!(
        o.status.success() && stdout(&o).starts_with(&format!("task {id} scheduled again, as attempt ")),
        "{}",
        stderr(&o)
    );
    let shown: serde_json::Value = serde_json::from_slice(&run(&env, &["show", &id, "--json"]).stdout).expect("json");
    assert_eq!(shown["task"]["data"]["fixed"], 1, "{shown}");
    let o = run(&env, &["retry", &id, "--data", "{nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not valid JSON"), "{}", stderr(&o));
    let o = run(&env, &["retry", "--data", "{}"]);
    assert_eq!(o.status.code(), Some(2), "--data needs an id: {}", stderr(&o));

    let o = run(&env, &["delete-finished", "--dead"]);
    assert_eq!(stdout(&o), "2 finished tasks deleted\n", "the scheduled one stays: {}", stderr(&o));
    let o = run(&env, &["delete-finished", "--older-than", "1h"]);
    assert_eq!(stdout(&o), "0 finished tasks deleted\n");
    let o = run(&env, &["delete-finished"]);
    assert_eq!(stdout(&o), "1 finished task deleted\n", "the success");
    assert_eq!(env.app.client.show(echo).await.err().map(|e| e.to_string()), Some(format!("task {echo} not found")));
    assert!(env.app.client.show(ids[0]).await.is_ok(), "the replayed task is scheduled, not finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_cancelled_replayed_and_deleted_from_the_command_line() {
    let env = Env::new(&["echo"]).await;
    let a = common::process::add(&env, &["echo"]).to_string();
    let mail: Vec<String> =
        (0..2).map(|_| common::process::add(&env, &["echo", "--queue", "mail"]).to_string()).collect();
    let o = run(&env, &["cancel", &a]);
    assert_eq!(stdout(&o), format!("task {a} cancelled\n"), "{}", stderr(&o));
    let o = run(&env, &["cancel", &a, "999999"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("error: task {a} is cancelled: only unfinished tasks can be cancelled\nerror: task 999999 not found\n")
    );
    let o = run(&env, &["cancel"]);
    assert_eq!(o.status.code(), Some(2), "ids or a filter are required: {}", stderr(&o));
    let o = run(&env, &["cancel", "--queue", "mail", "--status", "scheduled"]);
    assert_eq!(stdout(&o), "2 tasks cancelled (0 were running: their workers stop them)\n", "{}", stderr(&o));
    let o = run(&env, &["worker", "--drain", "--queues", "default,mail"]);
    assert!(stderr(&o).contains("0 runs finished"), "cancelled tasks never run: {}", stderr(&o));
    let listed: serde_json::Value =
        serde_json::from_slice(&run(&env, &["list", "--status", "cancelled", "--json"]).stdout).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(3), "{listed}");

    let o = run(&env, &["retry", "--all-cancelled", "--queue", "mail"]);
    assert_eq!(stdout(&o), "2 cancelled tasks scheduled again\n", "{}", stderr(&o));
    let o = run(&env, &["worker", "--drain", "--queues", "default,mail"]);
    assert!(stderr(&o).contains("2 runs finished (2 succeeded"), "{}", stderr(&o));
    for id in &mail {
        let shown: serde_json::Value =
            serde_json::from_slice(&run(&env, &["show", id, "--json"]).stdout).expect("json");
        assert_eq!(shown["task"]["last_status"], "success", "{shown}");
    }
    let o = run(&env, &["delete-finished", "--cancelled"]);
    assert_eq!(stdout(&o), "1 finished task deleted\n", "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_is_added_listed_run_by_the_overseer_paused_and_removed() {
    let env = Env::new(&["echo"]).await;
    let o = run(
        &env,
        &["schedule", "add", "tick", "--cron", "* * * * * *", "--handler", "echo", "--data", r#"{"say": "tick"}"#],
    );
    assert!(o.status.success() && stdout(&o).starts_with("schedule tick added: next slot "), "{}", stderr(&o));
    for (args, needle) in [
        (vec!["schedule", "add", "bad", "--cron", "61 * * * *", "--handler", "echo"], "cron expression"),
        (
            vec!["schedule", "add", "bad", "--cron", "* * * * *", "--handler", "echo", "--time-zone", "Mars/Base"],
            "Mars/Base",
        ),
        (vec!["schedule", "add", "bad", "--cron", "* * * * *", "--handler", "missing"], "unknown handler"),
        (vec!["schedule", "add", "tick", "--cron", "* * * * *", "--handler", "echo"], "exists already"),
        (vec!["schedule", "pause", "nope"], "no schedule named \"nope\""),
    ] {
        let o = run(&env, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    let text = stdout(&run(&env, &["schedule", "list"]));
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("tick") && l.contains("echo")), "{text}");
    // Every second has a slot: the overseer queues one once a second has passed.
    common::wait_until(std::time::Duration::from_secs(10), "the overseer queues a slot", || async {
        let o = run(&env, &["overseer", "--once"]);
        stdout(&o).contains("schedules: queued 1 periodic task (tick)")
    })
    .await;
    let o = run(&env, &["schedule", "pause", "tick"]);
    assert_eq!(stdout(&o), "schedule tick paused\n");
    let id: i64 = stdout(&run(&env, &["schedule", "trigger", "tick"])).trim().parse().expect("an id");
    let o = run(&env, &["worker", "--drain", "--no-overseer"]);
    assert!(stderr(&o).contains("2 runs finished (2 succeeded"), "{}", stderr(&o));
    let shown: serde_json::Value =
        serde_json::from_slice(&run(&env, &["show", &id.to_string(), "--json"]).stdout).expect("json");
    assert_eq!(
        (&shown["task"]["queued_by"], &shown["task"]["data"]["say"]),
        (&serde_json::json!("schedule:tick"), &serde_json::json!("tick"))
    );
    let listed: serde_json::Value =
        serde_json::from_slice(&run(&env, &["schedule", "list", "--json"]).stdout).expect("json");
    assert!(listed[0]["paused_on"].is_string(), "{listed}");
    assert_eq!(stdout(&run(&env, &["schedule", "remove", "tick"])), "schedule tick removed\n");
    assert_eq!(stdout(&run(&env, &["schedule", "list", "--json"])).trim(), "[]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_declared_in_the_configuration_file_are_kept_in_line_with_it() {
    let mut env = Env::new(&["echo"]).await;
    let o = run(&env, &["schedule", "add", "hand", "--cron", "0 0 * * *", "--handler", "echo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    env.set_config("[schedules.tick]\ncron = \"* * * * * *\"\nhandler = \"echo\"\ndata = { say = \"tick\" }\n").await;
    // A one-off pass shows what the file would change and changes nothing...
    let o = run(&env, &["overseer", "--once"]);
    assert!(stdout(&o).contains("declared schedules to be added (not applied): tick"), "{}", stdout(&o));
    assert!(stdout(&o).contains("`overseer --once --apply` makes them the file's"), "{}", stdout(&o));
    assert!(!stdout(&run(&env, &["schedule", "list"])).contains("tick"));
    // ...until told to apply it. Every second has a slot: the schedule is added, then its slots queued.
    let o = run(&env, &["overseer", "--once", "--apply"]);
    assert!(stdout(&o).contains("schedules: declared schedules added: tick"), "{}", stdout(&o));
    let text = stdout(&run(&env, &["schedule", "list"]));
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(line("tick").contains(" config ") && line("hand").contains(" added "), "{text}");
    let o = run(&env, &["schedule", "remove", "tick"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("tick is declared in the configuration file: remove it there"), "{}", stderr(&o));
    common::wait_until(std::time::Duration::from_secs(10), "the overseer queues a slot", || async {
        stdout(&run(&env, &["overseer", "--once"])).contains("queued 1 periodic task (tick)")
    })
    .await;
    let o = run(&env, &["worker", "--drain", "--no-overseer"]);
    assert!(stderr(&o).contains("succeeded, 0 failed"), "{}", stderr(&o));

    // Changed in the file: updated; gone from it: removed. The schedule added by hand stays.
    env.set_config("[schedules.tick]\ncron = \"0 * * * *\"\nhandler = \"echo\"\n").await;
    let o = run(&env, &["overseer", "--once", "--apply"]);
    assert!(stdout(&o).contains("schedules: declared schedules updated: tick"), "{}", stdout(&o));
    // A stale file (no schedules) run once removes nothing: it says what it would remove.
    env.set_config("[limits]\nmemory_mb = 64\n").await;
    let o = run(&env, &["overseer", "--once"]);
    assert!(stdout(&o).contains("declared schedules to be removed (not applied): tick"), "{}", stdout(&o));
    assert!(stdout(&run(&env, &["schedule", "list"])).contains("tick"), "the schedule is still there");
    let o = run(&env, &["overseer", "--once", "--apply"]);
    assert!(stdout(&o).contains("schedules: declared schedules removed: tick"), "{}", stdout(&o));
    let listed: serde_json::Value =
        serde_json::from_slice(&run(&env, &["schedule", "list", "--json"]).stdout).expect("json");
    assert_eq!(
        listed.as_array().map(|a| a.iter().map(|s| s["name"].clone()).collect::<Vec<_>>()),
        Some(vec!["hand".into()])
    );
    // A bad schedule in the file is one line naming it, for every command.
    let path = env.config.clone().expect("a configuration file");
    std::fs::write(&path, "[schedules.bad]\ncron = \"* * * * *\"\nhandler = \"echo\"\nmissed = \"twice\"\n")
        .expect("write");
    let o = run(&env, &["schedule", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("[schedules.bad]: ") && stderr(&o).contains("once or skip"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taskhost_stats_shows_each_handler_in_text_and_json() {
    let env = Env::new(&["echo", "fail"]).await;
    for _ in 0..3 {
        common::process::add(&env, &["echo"]);
    }
    common::process::add(&env, &["fail", "--data", r#"{"retryable": false}"#]);
    let o = run(&env, &["worker", "--drain"]);
    assert!(stderr(&o).contains("4 runs finished (3 succeeded, 1 failed)"), "{}", stderr(&o));
    let o = run(&env, &["stats"]);
    let text = stdout(&o);
    assert!(text.lines().next().is_some_and(|h| h.contains("P95 MS") && h.contains("FAIL%")), "{text}");
    let echo = text.lines().find(|l| l.starts_with("echo")).unwrap_or_default();
    assert!(echo.contains(" 3 ") && echo.contains(" 0.0 "), "{text}");
    let stats: serde_json::Value = serde_json::from_slice(&run(&env, &["stats", "--json"]).stdout).expect("json");
    let by = |h: &str| stats.as_array().and_then(|a| a.iter().find(|s| s["handler"] == h)).cloned().unwrap_or_default();
    assert_eq!(by("echo")["runs"]["succeeded"], 3, "{stats}");
    assert_eq!((&by("fail")["runs"]["failed"], &by("fail")["tasks"]["dead"]), (&1.into(), &1.into()), "{stats}");
    assert_eq!(by("fail")["failure_rate"], 1.0);
    let d = &by("echo")["duration_ms"];
    let (p50, p95, max) = (d["p50"].as_f64(), d["p95"].as_f64(), d["max"].as_f64());
    let ordered = matches!((p50, p95, max), (Some(a), Some(b), Some(c)) if a <= b && b <= c);
    assert!(ordered, "the median, 95th percentile and maximum, in order: {stats}");
    let only: serde_json::Value =
        serde_json::from_slice(&run(&env, &["stats", "--handler", "fail", "--json"]).stdout).expect("json");
    assert_eq!(only.as_array().map(Vec::len), Some(1));
}
