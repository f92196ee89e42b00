//! The `taskhost` command's settings and habits: options from the configuration file with flags >
//! environment > file > defaults, queueing without compiling, and `list --watch`. Real processes
//! on real SQLite files.

use crate::common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::process::{signal, stderr, stdout, wait_exit};
use common::{component, wait_until, Env};

/// `taskhost ARGS` in `cwd` with only the given TASKHOST_* variables.
fn taskhost(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
    for var in ["TASKHOST_DATABASE_URL", "TASKHOST_PLUGINS", "TASKHOST_CONFIG", "TASKHOST_LOG"] {
        c.env_remove(var);
    }
    c.envs(env.iter().copied()).args(args).current_dir(cwd).output().expect("run taskhost")
}

fn listed(o: &Output) -> usize {
    assert!(o.status.success(), "{}", stderr(o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("list --json");
    v.as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_come_from_flags_then_the_environment_then_the_file_then_the_defaults() {
    let env = Env::new(&["echo"]).await;
    let cwd = env.dir.path();
    let plugins = env.plugins.to_str().expect("utf-8");
    // Three databases holding 1, 2 and 3 tasks: which one a command reads shows where its URL came from.
    let urls: Vec<String> =
        ["a", "b", "c"].iter().map(|n| format!("sqlite://{}", cwd.join(format!("{n}.db")).display())).collect();
    for (i, url) in urls.iter().enumerate() {
        for _ in 0..=i {
            let o = taskhost(cwd, &[], &["--database-url", url, "--plugins", plugins, "add", "echo"]);
            assert!(o.status.success(), "{}", stderr(&o));
        }
    }
    let file = cwd.join("operator.toml");
    std::fs::write(
        &file,
        format!("[options]\ndatabase_url = \"{}\"\nplugins = \"{plugins}\"\n\n[limits]\nmemory_mb = 64\n", urls[0]),
    )
    .expect("write");
    let file = file.to_str().expect("utf-8");
    let from_env = [("TASKHOST_DATABASE_URL", urls[1].as_str())];
    assert_eq!(listed(&taskhost(cwd, &[], &["--config", file, "list", "--json"])), 1, "the file");
    assert_eq!(
        listed(&taskhost(cwd, &[("TASKHOST_CONFIG", file)], &["list", "--json"])),
        1,
        "the file by its variable"
    );
    assert_eq!(listed(&taskhost(cwd, &from_env, &["--config", file, "list", "--json"])), 2, "the environment");
    let flag = ["--config", file, "--database-url", urls[2].as_str(), "list", "--json"];
    assert_eq!(listed(&taskhost(cwd, &from_env, &flag)), 3, "the flag");
    assert_eq!(listed(&taskhost(cwd, &[], &["--plugins", plugins, "list", "--json"])), 0, "the default: ./taskhost.db");
    assert!(cwd.join("taskhost.db").exists());

    // A command's table, and bad values: one line naming the file, the line and column, the table and the key.
    std::fs::write(cwd.join("limit.toml"), format!("[options]\ndatabase_url = \"{}\"\n[list]\nlimit = 2\n", urls[2]))
        .expect("write");
    assert_eq!(listed(&taskhost(cwd, &[], &["--config", "limit.toml", "list", "--json"])), 2);
    assert_eq!(listed(&taskhost(cwd, &[], &["--config", "limit.toml", "list", "--json", "--limit", "3"])), 3);
    for (text, needle) in [
        (
            "[worker]\nconcurrency = 0\n",
            "limit.toml: line 2, column 1: [worker] concurrency: invalid value '0': must be at least 1",
        ),
        ("[worker]\nconcurency = 2\n", "limit.toml: line 2, column 1: [worker] concurency: no such option"),
        ("[list]\nlimit = \"many\"\n", "limit.toml: line 2, column 1: [list] limit: invalid value 'many'"),
        ("[options]\nno_migrate = 1\n", "limit.toml: line 2, column 1: [options] no_migrate: expected true or false"),
        (
            "# limits\n[limits]\nmemory_mb = \"64\"\n",
            "invalid configuration limit.toml: line 3, column 13: [limits] memory_mb: invalid type: string \"64\"",
        ),
        ("[limits]\nmemory_mb = 64\nmemory_mb = 65\n", "limit.toml: line 3, column 1: duplicate key"),
        ("[limits\nmemory_mb = 64\n", "limit.toml: line 1, column 8: "),
        (
            "[overseer.rotation]\nretention = \"banana\"\n",
            "limit.toml: line 2, column 13: [overseer.rotation] retention: \"banana\" is not a duration",
        ),
        (
            "[overseer.rotation]\ninterval = \"0s\"\n",
            "limit.toml: line 2, column 1: [overseer.rotation] interval = \"0s\" is out of range",
        ),
        // Checked after reading, and still placed: a limit's value, a queue's name.
        (
            "[queues.payments]\nmax_running = 2\nrate_limit = \"5 per s\"\n",
            "limit.toml: line 3, column 1: [queues.payments] rate_limit: \"5 per s\" is not a rate",
        ),
        ("\n[queues.\"pay \"]\nmax_running = 2\n", "limit.toml: line 2, column 9: [queues.pay ]: "),
        (
            "[overseer.rotation]\nretension = \"1d\"\n",
            "limit.toml: line 2, column 1: [overseer.rotation] retension: unknown field",
        ),
    ] {
        std::fs::write(cwd.join("limit.toml"), text).expect("write");
        let o = taskhost(cwd, &[], &["--config", "limit.toml", "list"]);
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(stderr(&o).contains(needle), "{text}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_checks_a_handler_from_its_types_without_compiling_it() {
    let env = Env::new(&[]).await;
    let cwd = env.dir.path();
    for name in ["py-stats", "js-words", "wrong-world", "greedy-import"] {
        std::fs::copy(component(name), env.plugins.join(format!("{name}.wasm"))).expect("copy");
    }
    let cache = cwd.join("cache");
    let url = format!("sqlite://{}", cwd.join("q.db").display());
    let base = ["--database-url", url.as_str(), "--plugins", env.plugins.to_str().expect("utf-8"), "--cache-dir"];
    let add = |args: &[&str]| taskhost(cwd, &[], &[&base[..], &[cache.to_str().expect("utf-8"), "add"], args].concat());
    for name in ["py-stats", "js-words"] {
        let o = add(&[name, "--data", "{}"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
    }
    let compiled = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert_eq!(compiled, 0, "queueing compiled nothing into the cache");
    for (name, needle) in [
        ("wrong-world", "does not export `handle` (it exports greet)"),
        ("greedy-import", "imports test:greedy/backdoor@0.1.0, which this host does not provide"),
    ] {
        let o = add(&[name]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(stderr(&o).contains(needle), "{name}: {}", stderr(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_watch_shows_a_task_change_as_it_happens_and_stops_on_a_signal() {
    let env = Env::new(&["echo"]).await;
    let id = common::process::add(&env, &["echo", "--data", r#"{"say": "hi"}"#]);
    let mut watch = common::process::Killed::from(
        common::taskhost_command(&env)
            .args(["list", "--watch", "100ms", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn list --watch"),
    );
    let lines = watch.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(lines).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let status_of = |line: &str| -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        assert_eq!(v[0]["task"]["id"], id, "{line}");
        v[0]["task"]["last_status"].as_str().map(str::to_string)
    };
    let first = rx.recv_timeout(Duration::from_secs(30)).expect("a first frame");
    assert_eq!(status_of(&first).as_deref(), Some("scheduled"), "{first}");
    let o = common::process::run(&env, &["worker", "--drain"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut seen = Vec::new();
    wait_until(Duration::from_secs(30), "the watch shows the success", || {
        seen.extend(rx.try_iter());
        std::future::ready(seen.iter().any(|l| status_of(l).as_deref() == Some("success")))
    })
    .await;
    signal(&watch, "INT");
    let out = wait_exit(watch, Duration::from_secs(10)).await;
    assert!(out.status.success(), "a signal ends the watch cleanly: {}", stdout(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_keeps_tasks_as_long_as_the_file_or_the_flag_says() {
    let env = Env::new(&["echo"]).await;
    let file = env.dir.path().join("retention.toml");
    let config = file.to_str().expect("utf-8");
    let env = &env;
    let finished = |n: usize| async move {
        let tasks: Vec<_> = (0..n).map(|_| taskhost::NewTask::new("echo", "{}")).collect();
        env.app.client.add_many(tasks).await.expect("add");
        env.drain(common::drain_config()).await;
    };
    let overseer = |extra: &[&str]| {
        let o = common::process::run(env, &[&["--config", config, "overseer", "--once"], extra].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    std::fs::write(&file, "[overseer.rotation]\nretention = \"100days\"\n").expect("write");
    finished(2).await;
    assert!(overseer(&[]).contains("rotation: nothing to do"), "kept: the file says 100 days");
    // The flag wins over the file.
    wait_until(Duration::from_secs(30), "rotation under --retention 10ms", || async {
        overseer(&["--retention", "10ms"]).contains("rotation: deleted 2 old finished tasks")
    })
    .await;
    std::fs::write(&file, "[overseer.rotation]\nretention = \"10ms\"\n").expect("write");
    finished(1).await;
    wait_until(Duration::from_secs(30), "rotation under the file's 10ms", || async {
        overseer(&[]).contains("rotation: deleted 1 old finished task")
    })
    .await;
}
