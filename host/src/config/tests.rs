//! Unit tests of the parent module.

use super::*;

fn policy(text: &str) -> std::result::Result<Policy, String> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| e.to_string())?;
    Policy::from_file(&file, Path::new("/"))
}

#[test]
fn an_empty_configuration_is_the_defaults() {
    let empty = policy("").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(format!("{empty:?}"), format!("{:?}", Policy::default()));
}

#[test]
fn each_overseer_service_is_set_in_its_table_and_checked() {
    let p = policy("[overseer]\nlease_ttl = \"1m\"\n[overseer.rotation]\nretention = \"90days\"\nbatch = 10\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.overseer.lease_ttl, Duration::from_secs(60));
    assert_eq!((p.overseer.rotation.retention, p.overseer.rotation.batch), (Duration::from_secs(90 * 86400), 10));
    assert_eq!(p.overseer.rotation.interval, crate::overseer::rotation::Config::DEFAULT_INTERVAL);
    let err = policy("[overseer.unserved]\nbatch = 0\n").expect_err("refused");
    assert_eq!(err, "[overseer.unserved] batch = 0 is out of range (1 to 100000)");
    let err = policy("[overseer.liveness]\ninterval = \"2years\"\n").expect_err("refused");
    assert!(err.starts_with("[overseer.liveness] interval = \"2years\" is out of range"), "{err}");
}

#[test]
fn the_task_data_limit_is_set_in_its_table_and_bounds_what_the_file_declares() {
    let file = "[tasks]\nmax_data_bytes = 4096\n[limits]\nmax_results_bytes = 2048\n\
                [handlers.h.limits]\nmax_results_bytes = 8192\n";
    let p = policy(file).expect("ok");
    assert_eq!(p.max_data_bytes, 4096);
    assert_eq!(p.largest_value_bytes(), 8192 + Limits::DEFAULT_MAX_LOG_BYTES);
    assert_eq!(Policy::default().largest_value_bytes(), crate::store::StoreOptions::DEFAULT_MAX_VALUE_BYTES);
    let err = policy("[tasks]\nmax_data_bytes = 67108865\n").expect_err("refused");
    assert_eq!(err, "[tasks] max_data_bytes = 67108865 is out of range (1024 to 67108864)");
    let err = policy("[tasks]\nmax_data_bytes = 1023\n").expect_err("refused");
    assert_eq!(err, "[tasks] max_data_bytes = 1023 is out of range (1024 to 67108864)");
    let big = "x".repeat(5000);
    let err = policy(&format!("[tasks]\nmax_data_bytes = 4096\n[schedules.s]\ncron = \"* * * * *\"\nhandler = \"h\"\ndata = {{ a = \"{big}\" }}\n"))
        .expect_err("refused");
    assert_eq!(err, "[schedules.s]: its data is 5008 bytes, over [tasks] max_data_bytes = 4096");
}

#[test]
fn a_deadline_past_the_maximum_is_refused() {
    let err = policy("[limits]\ndeadline = \"9223372036854775807s\"\n").expect_err("refused");
    assert!(err.contains("deadline"), "{err}");
}

#[test]
fn a_handler_may_be_raised_and_pinned() {
    let pin = "ab".repeat(32);
    let p = policy(&format!("[handlers.big]\ndigest = \"{pin}\"\nlimits = {{ memory_mb = 1024 }}\n")).expect("ok");
    let (limits, _) = p.for_handler("big", &pin).expect("pinned digest matches");
    assert_eq!(limits.memory_bytes, 1 << 30);
    assert!(p.for_handler("big", &"cd".repeat(32)).is_err(), "another component is refused");
    assert_eq!(p.for_handler("other", "x").expect("default").0, Limits::default());
}

#[test]
fn runs_in_flight_and_starts_are_limited_per_queue_and_per_handler() {
    let p = policy(
        "[queues.payments]\nmax_running = 2\nrate_limit_per_key = \"1/1s\"\nrate_burst_per_key = 3\n\
         fuel_per_turn = 10000000\non_success = \"delete\"\n\
         [handlers.mail]\nmax_running = 5\nrate_limit = \"10/1m\"\nrate_burst = 2\n",
    )
    .expect("ok");
    let per_key = p.run_limits.queues.get("payments").and_then(|l| l.rate_per_key).map(|r| r.to_string());
    assert_eq!(per_key.as_deref(), Some("1/1s (burst 3)"));
    assert_eq!(p.run_limits.queues.get("payments").and_then(|l| l.fuel_per_turn), Some(10_000_000));
    assert!(p.run_limits.deletes_successes("payments") && !p.run_limits.deletes_successes("mail"));
    let running = |l: Option<&Limit>| l.and_then(|l| l.max_running);
    assert_eq!(running(p.run_limits.queues.get("payments")), Some(2));
    assert_eq!(running(p.run_limits.handlers.get("mail")), Some(5));
    let rate = p.run_limits.handlers.get("mail").and_then(|l| l.rate).map(|r| r.to_string());
    assert_eq!(rate.as_deref(), Some("10/1m (burst 2)"));
    assert_eq!(p.for_handler("mail", "x").expect("default").0, Limits::default(), "nothing else changes");
    for (bad, what) in [
        ("[queues.q]\nmax_running = 0\n", "pause the queue"),
        ("[queues.q]\nmax_running = -3\n", "out of range"),
        ("[handlers.h]\nmax_running = 2000000\n", "out of range"),
        ("[queues.q]\nmax = 2\n", "unknown field"),
        ("[queues.q]\nrate_limit = \"5\"\n", "[queues.q] rate_limit: \"5\" is not a rate"),
        ("[handlers.h]\nrate_burst = 2\n", "rate_burst needs a rate_limit"),
        ("[handlers.h]\nrate_limit = \"0/1s\"\n", "count is 1 to"),
        ("[queues.q]\nrate_burst_per_key = 1\n", "[queues.q] rate_burst_per_key needs a rate_limit_per_key"),
        ("[queues.q]\nrate_limit_per_key = \"5/0s\"\n", "[queues.q] rate_limit_per_key: "),
        ("[handlers.h]\nrate_limit_per_key = \"5/1s\"\n", "unknown field"),
        ("[queues.q]\nfuel_per_turn = 1000\n", "[queues.q] fuel_per_turn = 1000 is out of range"),
        ("[keys.k]\nfuel_per_turn = 1000000\n", "unknown field"),
        ("[queues.q]\non_success = \"drop\"\n", "[queues.q] on_success = \"drop\" is neither keep nor delete"),
        ("[handlers.h]\non_success = \"delete\"\n", "unknown field"),
        ("[queues.\"mail \"]\nmax_running = 2\n", "[queues.mail ]: the queue begins or ends with white space"),
        ("[queues.\"*\"]\nmax_running = 2\n", "[queues.*]: * is not a queue's name"),
        ("[keys.\" k\"]\nweight = 2\n", "[keys. k]: the key begins or ends with white space"),
    ] {
        let err = policy(bad).expect_err(bad);
        assert!(err.contains(what), "{bad}: {err}");
    }
}

#[test]
fn schedules_are_declared_with_json_or_toml_data_and_checked() {
    let p = policy(
        "[schedules.nightly]\ncron = \"0 3 * * *\"\nhandler = \"report\"\ndata = { kind = \"daily\", n = 2 }\n\
         time_zone = \"Europe/Paris\"\nmissed = \"skip\"\n\
         [schedules.often]\ncron = \"*/10 * * * * *\"\nhandler = \"ping\"\ndata = '[1]'\nqueue = \"q\"\n",
    )
    .expect("ok");
    let names: Vec<&str> = p.schedules.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["nightly", "often"]);
    let nightly = &p.schedules[0];
    assert_eq!((nightly.data.as_str(), nightly.time_zone.as_str()), (r#"{"kind":"daily","n":2}"#, "Europe/Paris"));
    assert_eq!(nightly.missed, crate::schedule::Missed::Skip);
    assert_eq!((p.schedules[1].data.as_str(), p.schedules[1].queue.as_str()), ("[1]", "q"));
    for (bad, what) in [
        ("cron = \"61 * * * *\"\nhandler = \"h\"", "cron expression"),
        ("cron = \"* * * * *\"\nhandler = \"h\"\ntime_zone = \"Mars/Olympus\"", "Mars/Olympus"),
        ("cron = \"* * * * *\"\nhandler = \"../h\"", "not a plugin name"),
        ("cron = \"* * * * *\"\nhandler = \"h\"\ndata = '{nope'", "not valid JSON"),
        ("cron = \"* * * * *\"\nhandler = \"h\"\nmissed = \"twice\"", "once or skip"),
        ("cron = \"* * * * *\"\nhandler = \"h\"\nqueue = \"mail \"", "queue: the queue begins or ends with white"),
        ("cron = \"* * * * *\"\nhandler = \"h\"\nqueue = \"*\"", "queue: * is not a queue's name"),
    ] {
        let err = policy(&format!("[schedules.s]\n{bad}\n")).expect_err(bad);
        assert!(err.contains("[schedules.s]") && err.contains(what), "{err}");
    }
}
