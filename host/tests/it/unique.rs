//! Uniqueness over time from the command line and the API (issue 48): `add --unique-key K
//! --unique-states any` keeps the key once the task has run, `--unique-for` lets it go after a
//! period, `show` says how it is held, and bad values are one clear line each.

use crate::common;

use common::process::{add, run, stderr, stdout};
use common::Env;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_kept_in_any_state_outlives_its_task_and_show_says_so() {
    let env = Env::new(&["echo"]).await;
    let welcome = ["echo", "--unique-key", "welcome-7", "--unique-states", "any", "--unique-for", "30d"];
    let id = add(&env, &welcome);
    let o = run(&env, &["worker", "--drain"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Run and succeeded: the key is still taken, and adding again gives the same task.
    let o = run(&env, &["add", "echo", "--unique-key", "welcome-7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), id.to_string());
    assert!(stderr(&o).contains(&format!("holding that unique key exists already: task {id}")), "{}", stderr(&o));
    let shown = stdout(&run(&env, &["show", &id.to_string()]));
    assert!(shown.contains("unique key  welcome-7 (kept in any state, at most until "), "{shown}");
    // The default still lets the key go when its task ends.
    let plain = add(&env, &["echo", "--unique-key", "plain"]);
    assert!(run(&env, &["worker", "--drain"]).status.success());
    assert_ne!(add(&env, &["echo", "--unique-key", "plain"]), plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_unique_period_or_state_is_one_clear_line() {
    let env = Env::new(&["echo"]).await;
    // A period or states without a key: one line (clap's `requires` said it in five, with a
    // usage line listing the options the environment gave as if they were needed).
    for held in [["--unique-for", "1h"], ["--unique-states", "any"], ["--unique-states", "unfinished"]] {
        let o = run(&env, &["add", "echo", held[0], held[1]]);
        let said = (o.status.code(), stderr(&o));
        let line = "error: invalid unique_key: a unique period or states need a unique key\n".to_string();
        assert_eq!(said, (Some(1), line), "{held:?}");
    }
    let o = run(&env, &["add", "echo", "--unique-key", "k", "--unique-states", "forever"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unfinished, succeeded, any"), "{}", stderr(&o));
    let o = run(&env, &["add", "echo", "--unique-key", "k", "--unique-for", "0s"]);
    assert!(!o.status.success() && stderr(&o).lines().count() == 1, "one line: {}", stderr(&o));
    assert!(stderr(&o).contains("unique_for") && stderr(&o).contains("out of range"), "{}", stderr(&o));
    let line = r#"{"handler": "echo", "unique_for": "1h"}"#;
    let file = env.dir.path().join("tasks.jsonl");
    std::fs::write(&file, format!("{line}\n")).expect("write");
    let o = run(&env, &["add", "--many", file.to_str().expect("path")]);
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("need a unique key"), "{}", stderr(&o));
    let queued = env.app.client.list(&taskhost::model::TaskFilter::default()).await.expect("list");
    assert!(queued.is_empty(), "nothing was queued: {queued:?}");
}
