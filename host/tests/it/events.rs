//! Task events as Server-Sent Events (`GET /api/v1/events`), with real server and worker
//! processes: a stream is told each task as it is queued, runs, fails a run and ends; `handler`,
//! `queue` and `task` keep only the tasks they name (a stream for a task is told its state at
//! once); bad streams get one clear error; a server that stops ends its streams; more ends at
//! once than a look reads are told as `lagged`, and the stream goes on, as is a stream read
//! slower than its events come (in process, over the router), and a stream opened while the
//! database cannot be read is told it lagged once it can. `/metrics`
//! counts the open streams, which is how the test knows they are open before tasks are added.

use crate::common;

use std::time::{Duration, Instant};

use common::process::{signal, spawn_worker, wait_exit};
use common::served::Served;
use common::sse::Events;
use common::{wait_until, Db, Env};
use serde_json::{json, Value};
use taskhost::clock::Clock;
use taskhost::model::NewTask;
use taskhost::runner::WorkerConfig;

const TOLD: Duration = Duration::from_secs(30);

fn add(served: &Served, body: Value) -> i64 {
    let (status, added) = served.call("POST", "/tasks", None, Some(&body.to_string()));
    assert_eq!(status, 201, "{added}");
    added["id"].as_i64().expect("an id")
}

/// Until `/metrics` counts `n` open event streams.
async fn streams(served: &Served, n: usize) {
    let want = format!("taskhost_api_event_streams {n}\n");
    wait_until(TOLD, &format!("{n} event streams"), || async { served.page("/metrics").2.contains(&want) }).await;
}

/// Each event's fields are the ones the OpenAPI document gives the stream's data, its required
/// ones all there (schemathesis leaves the stream out: it would wait for its end).
fn as_documented(served: &Served, told: &[Value]) {
    let (status, _, body) = served.page("/api/openapi.json");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).expect("the document");
    let answer = &doc["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"]["text/event-stream"];
    let name = answer["schema"]["$ref"].as_str().expect("a schema").rsplit('/').next().unwrap_or_default();
    let schema = &doc["components"]["schemas"][name];
    let properties = schema["properties"].as_object().expect("properties");
    for event in told {
        let fields = event.as_object().expect("an object");
        assert!(fields.keys().all(|k| properties.contains_key(k)), "{event} beside {schema}");
        let required = schema["required"].as_array().expect("required");
        assert!(required.iter().all(|r| fields.contains_key(r.as_str().unwrap_or_default())), "{event}: {schema}");
    }
}

fn is(id: i64, state: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["id"] == id && e["state"] == state
}

async fn a_stream_tells_each_task_as_it_is_queued_runs_fails_and_ends(db: Db) {
    let mut env = Env::on(db, &["echo", "fail", "spin"]).await;
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1h\"\n").await;
    let mut served = Served::start(&env, "127.0.0.1:0");
    let all = Events::open(&served, "/events");
    assert_eq!(all.status, 200, "{}", all.head);
    assert!(all.head.contains("content-type: text/event-stream"), "{}", all.head);
    let failing = Events::open(&served, "/events?handler=fail");
    let other = Events::open(&served, "/events?queue=other,elsewhere");
    streams(&served, 3).await;

    // Queued, with no worker yet: each is told scheduled.
    let echo = add(&served, json!({"handler": "echo", "data": {"n": 1}}));
    let fail = add(&served, json!({"handler": "fail", "max_attempts": 2}));
    let later = add(&served, json!({"handler": "echo", "queue": "other", "at": "2099-01-01T00:00:00Z"}));
    let told = all.until(TOLD, "the three queued", |e| e["id"] == later);
    for id in [echo, fail, later] {
        assert!(told.iter().any(is(id, "scheduled")), "{id} told queued: {told:?}");
    }
    assert_eq!(told.last().map(|e| (e["queue"].clone(), e["attempt"].clone())), Some((json!("other"), json!(0))));

    // A worker runs them: echo succeeds; fail fails, is scheduled again, and dies.
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    let told = all.until(TOLD, "echo succeeded", is(echo, "succeeded"));
    let ended = told.last().expect("told");
    assert_eq!((ended["handler"].as_str(), ended["attempt"].as_i64()), (Some("echo"), Some(1)), "{ended}");
    assert!(ended["finished_on"].is_string(), "{ended}");
    as_documented(&served, &told);
    let told = failing.until(TOLD, "fail dead", is(fail, "dead"));
    as_documented(&served, &told);
    assert!(told.iter().all(|e| e["handler"] == "fail"), "only fail's events: {told:?}");
    assert!(told.iter().any(|e| e["state"] == "scheduled" && e["failures"] == 1), "its retry told: {told:?}");
    assert_eq!(told.last().map(|e| e["failures"].clone()), Some(json!(2)));

    // A task running is told running, with its progress, and cancelled when it is.
    let spin = add(&served, json!({"handler": "spin"}));
    let told = all.until(TOLD, "spin running", is(spin, "running"));
    assert_eq!(told.last().map(|e| e["progress"].clone()), Some(json!(0)));
    as_documented(&served, &told);
    let (status, answer) = served.call("POST", &format!("/tasks/{spin}/cancel"), None, None);
    assert_eq!(status, 200, "{answer}");
    all.until(TOLD, "spin cancelled", is(spin, "cancelled"));

    // A stream of one queue is told only that queue's tasks.
    let (status, answer) = served.call("POST", &format!("/tasks/{later}/cancel"), None, None);
    assert_eq!(status, 200, "{answer}");
    let told = other.until(TOLD, "later cancelled", is(later, "cancelled"));
    assert!(told.iter().all(|e| e["queue"] == "other"), "only queue other's events: {told:?}");
    assert!(told.iter().any(is(later, "scheduled")), "{told:?}");

    // A stream of one task is told its state as it is, at once.
    let one = Events::open(&served, &format!("/events?task={echo}"));
    let told = one.until(TOLD, "echo as it is", |_| true);
    assert_eq!(
        told,
        [json!({"id": echo, "queue": "default", "handler": "echo", "state": "succeeded",
        "attempt": 1, "failures": 0, "finished_on": ended["finished_on"]})]
    );
    // The other streams are not told it again: nothing of it changed.
    let marker = add(&served, json!({"handler": "echo", "queue": "other", "at": "2099-01-01T00:00:00Z"}));
    let told = all.until(TOLD, "the next task queued", |e| e["id"] == marker);
    assert!(told.iter().all(|e| e["id"] != echo), "echo told again to a stream that had it: {told:?}");

    for (path, status, code, needle) in [
        ("/events?task=999999".to_string(), 404, "not-found", "task 999999 not found"),
        (format!("/events?task={echo},x"), 400, "invalid", "not a list of task ids"),
        ("/events?colour=red".to_string(), 400, "invalid", "no such parameter (queue, handler, task)"),
        ("/events?task=".to_string(), 400, "invalid", "an empty list"),
        ("/events?queue=,".to_string(), 400, "invalid", "an empty list"),
        (format!("/events?queue={}", vec!["q"; 101].join(",")), 400, "invalid", "at most 100 queues"),
        (format!("/events?handler={}", "h".repeat(129)), 400, "invalid", "a name of 129 bytes"),
    ] {
        let (got, error) = served.call("GET", &path, None, None);
        assert_eq!((got, error["error"]["code"].as_str()), (status, Some(code)), "{path}: {error}");
        assert!(error["error"]["message"].as_str().unwrap_or("").contains(needle), "{path}: {error}");
    }
    signal(&worker, "TERM");
    wait_exit(worker, TOLD).await;

    // A server asked to stop ends its streams, and exits.
    let asked = Instant::now();
    let kill = std::process::Command::new("kill").args(["-TERM", &served.pid().to_string()]).status();
    assert!(kill.expect("kill").success());
    for stream in [all, failing, other, one] {
        while stream.next(TOLD).is_some() {}
    }
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while !served.exited() {
        assert!(asked.elapsed() < TOLD, "serve did not exit");
        tick.tick().await;
    }
    eprintln!("serve exited {:?} after SIGTERM with four event streams open", asked.elapsed());
}

/// The next `lagged` event's data, within `within` (task events before it are passed over).
fn lagged(stream: &Events, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stream.next(left) {
            Some((name, data)) if name == "lagged" => return data,
            Some(_) => {}
            None => panic!("the stream ended before it was told it lagged"),
        }
    }
}

async fn more_ends_at_once_than_a_look_reads_are_told_as_lagged_and_the_stream_goes_on(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let all = Events::open(&served, "/events");
    streams(&served, 1).await;
    // 6,000 queued (no worker): told as they come, 5,000 a look at most, nothing lost.
    let tasks: Vec<Value> = (0..6000).map(|i| json!({"handler": "echo", "queue": "burst", "data": {"i": i}})).collect();
    let (status, added) = served.call("POST", "/tasks", None, Some(&json!({ "tasks": tasks }).to_string()));
    assert_eq!(status, 201, "{}", added.to_string().chars().take(300).collect::<String>());
    let last = added["tasks"].as_array().and_then(|t| t.last()).and_then(|t| t["id"].as_i64()).expect("ids");
    let told = all.until(TOLD, "the last of 6,000 queued", |e| e["id"] == last);
    assert!(told.len() >= 6000, "each queued task told: {}", told.len());

    // All cancelled at once: more ended than a look reads, so the stream is told it lagged.
    let (status, answer) = served.call("POST", "/tasks/cancel", None, Some(r#"{"queue": "burst"}"#));
    assert_eq!((status, &answer["cancelled"]), (200, &json!(6000)), "{answer}");
    assert_eq!(lagged(&all, TOLD), json!({"reason": "burst"}));

    // And goes on: a task queued next is told.
    let next = add(&served, json!({"handler": "echo", "queue": "after"}));
    all.until(TOLD, "the task after the burst", is(next, "scheduled"));
}

/// A stream's body served by the router in this process, its events read as they come, and the
/// last event id it was told.
struct Body(axum::body::Body, String, Option<String>);

impl Body {
    /// Open `/api/v1/events` on `router`.
    async fn open(router: &axum::Router) -> Body {
        Body::resume(router, None).await
    }

    /// Open `/api/v1/events` on `router`, with `Last-Event-ID: last` if given.
    async fn resume(router: &axum::Router, last: Option<&str>) -> Body {
        Body::at(router, "/api/v1/events", last).await
    }

    /// Open `path` on `router`, with `Last-Event-ID: last` if given.
    async fn at(router: &axum::Router, path: &str, last: Option<&str>) -> Body {
        use tower::ServiceExt;
        let mut req = axum::http::Request::get(path).header("host", "localhost");
        if let Some(last) = last {
            req = req.header("last-event-id", last);
        }
        let answer = router.clone().oneshot(req.body(axum::body::Body::empty()).expect("a request")).await;
        let answer = answer.expect("an answer");
        assert_eq!(answer.status(), 200);
        Body(answer.into_body(), String::new(), None)
    }

    /// The next event's name and data (comments passed over), within `within`.
    async fn next(&mut self, within: Duration) -> (String, Value) {
        use http_body_util::BodyExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.1.find("\n\n") {
                let event: String = self.1.drain(..end + 2).collect();
                let field = |name: &str| event.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
                if let Some(id) = field("id:") {
                    self.2 = Some(id.to_string());
                }
                let Some(data) = field("data:") else { continue };
                let name = field("event:").unwrap_or("message").to_string();
                return (name, serde_json::from_str(data).unwrap_or(Value::String(data.into())));
            }
            let frame = tokio::time::timeout_at(deadline, self.0.frame()).await.expect("an event in time");
            let frame = frame.expect("the stream goes on").expect("a frame");
            if let Ok(data) = frame.into_data() {
                self.1.push_str(std::str::from_utf8(&data).expect("text"));
            }
        }
    }

    /// Read until an event carrying an id (an id alone too), within `within`: the id.
    async fn an_id(&mut self, within: Duration) -> String {
        use http_body_util::BodyExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.1.find("\n\n") {
                let event: String = self.1.drain(..end + 2).collect();
                if let Some(id) = event.lines().find_map(|l| l.strip_prefix("id:")) {
                    return id.trim().to_string();
                }
            }
            let frame = tokio::time::timeout_at(deadline, self.0.frame()).await.expect("an id in time");
            let frame = frame.expect("the stream goes on").expect("a frame");
            if let Ok(data) = frame.into_data() {
                self.1.push_str(std::str::from_utf8(&data).expect("text"));
            }
        }
    }

    /// Read until a `task` event for which `done` holds: the `task` events read.
    async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + TOLD;
        let mut told = Vec::new();
        loop {
            let (name, data) = self.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await;
            assert!(name == "task" || name == "lagged", "{what}: {name} {data}");
            if name == "task" {
                told.push(data);
                if done(told.last().unwrap_or(&Value::Null)) {
                    return told;
                }
            }
        }
    }
}

/// A client reading slower than its events come is told `lagged`, with the reason `behind` and
/// how many looks it missed, and its stream goes on. Over the router in this process: the slow
/// stream's body is not read at all while the looks go by (over a socket, how much the kernel and
/// the server buffer first would decide when it falls behind).
async fn a_stream_read_slower_than_its_events_come_is_told_it_fell_behind_and_goes_on(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let router = taskhost::api::router(env.app.client.clone(), Default::default());
    let mut read = Body::open(&router).await;
    let mut unread = Body::open(&router).await;
    // 40 looks with news, each its own (the read stream was told its task before the next is
    // queued): 8 more than the reader keeps for a stream (32).
    for i in 0..40 {
        let id = env.app.client.add(NewTask::new("echo", "{}").with_queue("looks")).await.expect("add").id;
        read.until(&format!("task {i} told"), |e| e["id"] == id).await;
    }
    let (name, data) = unread.next(TOLD).await;
    assert_eq!(name, "lagged", "{data}");
    assert_eq!(data["reason"], "behind", "{data}");
    assert!(data["looks"].as_u64().is_some_and(|n| n >= 8), "{data}");
    // And goes on: a task queued now is told after what the reader kept.
    let next = env.app.client.add(NewTask::new("echo", "{}").with_queue("after")).await.expect("add").id;
    unread.until("the task after the lag", is(next, "scheduled")).await;
}

/// An end written after a later one (its time before the newest end the reader has seen, as a
/// batch of another worker committed late) is told, once, and the ends told before are not told
/// again: the reader counts the second before its newest end and reads it again only when the
/// count differs. The worker's clock, which stamps the ends, is set by the test.
async fn an_end_written_after_a_later_one_is_told_once(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let add = |queue: &'static str| {
        let client = env.app.client.clone();
        async move { client.add(NewTask::new("echo", "{}").with_queue(queue)).await.expect("add").id }
    };
    // Queued before the stream opens, so the reader does not read them again as new ones.
    let (early, late, third) = (add("early").await, add("late").await, add("third").await);
    let router = taskhost::api::router(env.app.client.clone(), Default::default());
    let mut stream = Body::open(&router).await;
    // The ends come after the reader's first look, which reads from the server's time on.
    let server = env.app.store.server_time().await.expect("the server's time");
    let t0 = server.unwrap_or_else(chrono::Utc::now).max(clock.now()) + chrono::Duration::seconds(2);
    let t0 = chrono::SubsecRound::trunc_subsecs(t0, 6);
    let drain = |queue: &str| WorkerConfig { queues: vec![queue.into()], ..common::drain_config() };
    clock.set(t0 + chrono::Duration::milliseconds(500));
    env.drain(drain("late")).await;
    stream.until("the later end", is(late, "succeeded")).await;
    // Written now, ended 300 ms before the end told: within the second counted.
    clock.set(t0 + chrono::Duration::milliseconds(200));
    env.drain(drain("early")).await;
    let told = stream.until("the end written late", is(early, "succeeded")).await;
    assert!(!told.iter().any(is(late, "succeeded")), "the later end told again: {told:?}");
    // And nothing twice: the events until a third end name neither end again.
    clock.set(t0 + chrono::Duration::milliseconds(800));
    env.drain(drain("third")).await;
    let told = stream.until("a third end", is(third, "succeeded")).await;
    for id in [early, late] {
        assert!(!told.iter().any(|e| e["id"] == id), "{id} told again: {told:?}");
    }
}

/// A stream opened while the database cannot be read (its tasks' table is away) opens all the
/// same, and is told it lagged once the reader can look: what changed meanwhile it cannot tell.
/// Then it goes on.
async fn a_stream_opened_while_the_database_cannot_be_read_is_told_it_lagged_once_it_can(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let rename = |from: &str, to: &str| format!("ALTER TABLE {from} RENAME TO {to}");
    common::locker::execute(db, &env.db_url, &rename("task_queue", "task_queue_away")).await;
    let router = taskhost::api::router(env.app.client.clone(), Default::default());
    let mut stream = Body::open(&router).await;
    common::locker::execute(db, &env.db_url, &rename("task_queue_away", "task_queue")).await;
    let (name, data) = stream.next(TOLD).await;
    assert_eq!((name.as_str(), data), ("lagged", json!({"reason": "unavailable"})));
    let next = env.app.client.add(NewTask::new("echo", "{}").with_queue("after")).await.expect("add").id;
    stream.until("the task queued once the database can be read", is(next, "scheduled")).await;
}

/// The looks the event streams' reader told, from `/metrics` on `router`.
async fn looks(router: &axum::Router) -> u64 {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let req = axum::http::Request::get("/metrics").header("host", "localhost").body(axum::body::Body::empty());
    let answer = router.clone().oneshot(req.expect("a request")).await.expect("an answer");
    let body = answer.into_body().collect().await.expect("the body").to_bytes();
    let text = String::from_utf8_lossy(&body);
    let line = text.lines().find_map(|l| l.strip_prefix("taskhost_api_event_looks_total "));
    line.and_then(|n| n.trim().parse::<f64>().ok()).expect("the looks counted") as u64
}

/// A stream that reconnects with the id of the last event it read (`Last-Event-ID`, as a
/// browser's `EventSource` sends it) is told first what changed while it was away, as it was
/// then (the reader had told it to another stream); after every stream closed too, the reader
/// going on meanwhile (its looks counted in `/metrics`); an id the server never wrote is told
/// `lagged` (`resume`).
async fn a_stream_that_reconnects_with_its_last_event_id_is_told_what_it_missed(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let router = taskhost::api::router(env.app.client.clone(), Default::default());
    let add = |queue: &'static str| {
        let client = env.app.client.clone();
        async move { client.add(NewTask::new("echo", "{}").with_queue(queue)).await.expect("add").id }
    };
    let mut first = Body::open(&router).await;
    let a = add("a").await;
    first.until("a queued", is(a, "scheduled")).await;
    let last = first.2.clone().expect("an event id");
    let mut other = Body::open(&router).await;
    drop(first);
    let b = add("b").await;
    other.until("b queued, seen by the reader", is(b, "scheduled")).await;
    let mut again = Body::resume(&router, Some(&last)).await;
    let (name, data) = again.next(TOLD).await;
    assert_eq!((name.as_str(), &data["id"], &data["state"]), ("task", &json!(b), &json!("scheduled")), "{data}");
    let last = again.2.clone().expect("an event id");

    // With no stream open, the reader goes on: it tells the look that finds c to none, and keeps it.
    drop((again, other));
    let before = looks(&router).await;
    let c = add("c").await;
    wait_until(TOLD, "the reader's look that finds c", || async { looks(&router).await > before }).await;
    let mut back = Body::resume(&router, Some(&last)).await;
    let (name, data) = back.next(TOLD).await;
    assert_eq!((name.as_str(), &data["id"], &data["state"]), ("task", &json!(c), &json!("scheduled")), "{data}");

    let mut stranger = Body::resume(&router, Some("elsewhere-7")).await;
    assert_eq!(stranger.next(TOLD).await, ("lagged".to_string(), json!({"reason": "resume"})));
}

/// A stream whose filter keeps nothing is sent the id of the first look after it opened, alone,
/// and then of each 64th look in a row that told it nothing, so its place stays within the
/// looks the server keeps for a resume.
async fn a_stream_told_nothing_for_many_looks_is_sent_its_place(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let router = taskhost::api::router(env.app.client.clone(), Default::default());
    let mut quiet = Body::at(&router, "/api/v1/events?queue=quiet", None).await;
    // Read as it comes (a stream not read falls behind the reader's backlog instead).
    let places = tokio::spawn(async move { (quiet.an_id(TOLD * 2).await, quiet.an_id(TOLD * 2).await) });
    let mut loud = Body::open(&router).await;
    let mut ids = Vec::new();
    for i in 0..65 {
        let id = env.app.client.add(NewTask::new("echo", "{}").with_queue("loud")).await.expect("add").id;
        loud.until(&format!("task {i} told"), |e| e["id"] == id).await;
        ids.push(loud.2.clone());
    }
    let (first, place) = places.await.expect("the quiet stream read");
    assert_eq!(Some(&first), ids[0].as_ref(), "the first look's id, as the loud stream was told its task");
    assert_eq!(Some(&place), ids[64].as_ref(), "the 64th look after it");
    let q = env.app.client.add(NewTask::new("echo", "{}").with_queue("quiet")).await.expect("add").id;
    let mut back = Body::at(&router, "/api/v1/events?queue=quiet", Some(&place)).await;
    let (name, data) = back.next(TOLD).await;
    assert_eq!((name.as_str(), &data["id"]), ("task", &json!(q)), "{data}");
}

crate::on_every_database!(
    a_stream_told_nothing_for_many_looks_is_sent_its_place,
    a_stream_that_reconnects_with_its_last_event_id_is_told_what_it_missed,
    a_stream_opened_while_the_database_cannot_be_read_is_told_it_lagged_once_it_can,
    a_stream_tells_each_task_as_it_is_queued_runs_fails_and_ends,
    an_end_written_after_a_later_one_is_told_once,
    more_ends_at_once_than_a_look_reads_are_told_as_lagged_and_the_stream_goes_on,
    a_stream_read_slower_than_its_events_come_is_told_it_fell_behind_and_goes_on
);
