//! Tests of `limits.rs`.
use super::*;

#[test]
fn a_change_sets_what_it_gives_takes_out_what_is_null_and_keeps_the_rest() {
    let change = |json: &str| serde_json::from_str::<LimitChange>(json).expect(json);
    let mut limit = Limit::default();
    change(r#"{"max_running": 3, "rate_limit": "5/1s", "rate_burst": 2}"#).apply(&mut limit).expect("set");
    assert_eq!(limit.max_running, Some(3));
    assert_eq!(limit.rate.map(|r| r.to_string()).as_deref(), Some("5/1s (burst 2)"));
    change(r#"{"rate_limit": "10/1m"}"#).apply(&mut limit).expect("rate");
    assert_eq!(limit.rate.map(|r| r.to_string()).as_deref(), Some("10/1m (burst 2)"), "the burst stays");
    change(r#"{"max_running": null}"#).apply(&mut limit).expect("take out");
    assert_eq!(limit.max_running, None);
    assert!(limit.rate.is_some());
    for (bad, why) in [
        ("{}", "nothing to change"),
        (r#"{"max_running": 0}"#, "pause the queue"),
        (r#"{"rate_limit": "fast"}"#, "not a rate"),
    ] {
        let err = change(bad).apply(&mut limit).expect_err(bad);
        assert!(err.contains(why), "{bad}: {err}");
    }
    let mut none = Limit::default();
    assert!(change(r#"{"rate_burst": 4}"#).apply(&mut none).is_err_and(|e| e.contains("needs a rate_limit")));
    assert!(serde_json::from_str::<LimitChange>(r#"{"max": 1}"#).is_err(), "unknown fields are refused");
    let mut key = Limit::default();
    change(r#"{"weight": 3}"#).apply(&mut key).expect("weight");
    assert_eq!((key.weight, key.check_for(LimitScope::Key)), (Some(3), Ok(())));
    assert!(key.check_for(LimitScope::Queue).is_err(), "a queue takes no weight");
    assert!(change(r#"{"weight": 0}"#).apply(&mut key).is_err_and(|e| e.contains("out of range")));
    assert!(change(r#"{"weight": 1001}"#).apply(&mut key).is_err());
    change(r#"{"max_running_per_key": 2}"#).apply(&mut limit).expect("per key");
    assert_eq!((limit.max_running_per_key, limit.check_for(LimitScope::Queue)), (Some(2), Ok(())));
    assert!(limit.check_for(LimitScope::Handler).is_err() && limit.check_for(LimitScope::Key).is_err());
    let mut paced = Limit::default();
    change(r#"{"rate_limit_per_key": "2/1s", "rate_burst_per_key": 1}"#).apply(&mut paced).expect("rate per key");
    assert_eq!(paced.rate_per_key.map(|r| r.to_string()).as_deref(), Some("2/1s (burst 1)"));
    assert_eq!((paced.rate, paced.check_for(LimitScope::Queue)), (None, Ok(())), "the queue's own rate apart");
    assert!(paced.check_for(LimitScope::Handler).is_err() && paced.check_for(LimitScope::Key).is_err());
    change(r#"{"rate_limit_per_key": "3/1s"}"#).apply(&mut paced).expect("rate per key again");
    assert_eq!(paced.rate_per_key.map(|r| r.burst), Some(1), "the burst per key stays");
    assert!(change(r#"{"rate_burst_per_key": 2, "rate_limit_per_key": null}"#)
        .apply(&mut paced)
        .is_err_and(|e| e.contains("rate_burst_per_key needs a rate_limit_per_key")));
    let mut fuel = Limit::default();
    change(r#"{"fuel_per_turn": 5000000}"#).apply(&mut fuel).expect("fuel per turn");
    assert_eq!((fuel.fuel_per_turn, fuel.check_for(LimitScope::Queue)), (Some(5_000_000), Ok(())));
    assert!(fuel.check_for(LimitScope::Handler).is_err() && fuel.check_for(LimitScope::Key).is_err());
    for bad in [r#"{"fuel_per_turn": 999999}"#, r#"{"fuel_per_turn": 18446744073709551615}"#] {
        assert!(change(bad).apply(&mut fuel).is_err_and(|e| e.contains("out of range")), "{bad}");
    }
    change(r#"{"fuel_per_turn": null}"#).apply(&mut fuel).expect("taken out");
    assert!(!fuel.is_some());
}

#[test]
fn a_rate_and_a_burst_given_together_are_checked_together_not_against_the_burst_they_replace() {
    let change = |json: &str| serde_json::from_str::<LimitChange>(json).expect(json);
    let mut limit = Limit::default();
    change(r#"{"rate_limit": "1000/1s", "rate_burst": 1000}"#).apply(&mut limit).expect("fast");
    // 1,000 starts at one an hour would span 41 days: the stored burst is not what is asked for.
    change(r#"{"rate_limit": "1/1h", "rate_burst": 1}"#).apply(&mut limit).expect("slow, with its own burst");
    assert_eq!(limit.rate.map(|r| r.to_string()).as_deref(), Some("1/1h (burst 1)"));
    let err = change(r#"{"rate_limit": "1/1h", "rate_burst": 1000}"#).apply(&mut limit).expect_err("too long");
    assert!(err.contains("a burst of 1000 at this pace"), "{err}");
    change(r#"{"rate_limit_per_key": "1000/1s", "rate_burst_per_key": 1000}"#).apply(&mut limit).expect("per key");
    change(r#"{"rate_limit_per_key": "1/1h", "rate_burst_per_key": 2}"#).apply(&mut limit).expect("per key, slow");
    assert_eq!(limit.rate_per_key.map(|r| r.to_string()).as_deref(), Some("1/1h (burst 2)"));
}

#[test]
fn limit_names_say_their_scope() {
    assert_eq!(LimitScope::parse_name("queue:mail"), Ok((LimitScope::Queue, "mail")));
    assert_eq!(LimitScope::parse_name("handler:send-mail"), Ok((LimitScope::Handler, "send-mail")));
    assert_eq!(LimitScope::parse_name("key:tenant-a"), Ok((LimitScope::Key, "tenant-a")));
    for bad in ["mail", "tenant:a", "queue:", "queue:*", "queue:a\0", "queue: a", "handler:a/b", "key:", "key:k "] {
        assert!(LimitScope::parse_name(bad).is_err(), "{bad} was taken");
    }
    assert_eq!(LimitScope::Handler.name("x"), "handler:x");
}
