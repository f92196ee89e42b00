//! Queues as workers see them: which hold scheduled tasks (what a worker of every queue claims
//! from), and how many live runners claim from each.

use super::*;

pub async fn queues_holding_scheduled_tasks_are_listed_and_each_counts_the_live_runners_claiming_from_it(
    store: SharedStore,
) {
    assert!(store.scheduled_queues(10).await.expect("names").is_empty(), "an empty store holds no queue");
    let tasks = vec![
        NewTask::new("h", "{}").with_queue("b").with_scheduled_on(t0() + secs(60)),
        NewTask::new("h", "{}").with_queue("a"),
        NewTask::new("h", "{}").with_queue("c"),
        NewTask::new("h", "{}").with_queue("c"),
        NewTask::new("h", "{}").with_queue("d"),
    ];
    store.add_tasks(&tasks, t0()).await.expect("add");
    let quiet = runner(&store, t0()).await;
    assert_eq!(store.claim(quiet, &["d".into()], 10, t0(), DAY).await.expect("claim").len(), 1);
    // Due or not, each once, in order; d's only task is running.
    let names = store.scheduled_queues(10).await.expect("names");
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(store.scheduled_queues(2).await.expect("names"), ["a", "b"], "at most the limit");
    let served = |store: SharedStore| async move {
        let queues = store.queues(t0()).await.expect("queues");
        queues.into_iter().map(|q| (q.name, q.served_by)).collect::<Vec<_>>()
    };
    // A runner that has not said what it claims from (an older host) counts for every queue.
    let all = |n: u32| ["a", "b", "c", "d"].map(|q| (q.to_string(), n)).to_vec();
    assert_eq!(served(store.clone()).await, all(1));
    store.set_runner_queues(quiet, &["a".into(), "d".into()]).await.expect("queues");
    let every = runner(&store, t0()).await;
    store.set_runner_queues(every, &[EVERY_QUEUE.into()]).await.expect("queues");
    let shown = served(store.clone()).await;
    assert_eq!(shown, [("a".into(), 2), ("b".into(), 1), ("c".into(), 1), ("d".into(), 2)]);
    let live = store.live_runners().await.expect("runners");
    let recorded: Vec<_> = live.iter().map(|r| r.queues.clone()).collect();
    assert_eq!(recorded, [Some(vec!["a".to_string(), "d".to_string()]), Some(vec!["*".to_string()])]);
    // A runner that stopped claims from nothing.
    store.finish_runner(every, RunnerStatus::Success, t0()).await.expect("finish");
    assert_eq!(served(store.clone()).await, [("a".into(), 1), ("b".into(), 0), ("c".into(), 0), ("d".into(), 1)]);
    // `*` as a worker names queues: due work in any queue.
    let only_c = store.has_due_work(&["c".into()], t0()).await.expect("due");
    let anywhere = store.has_due_work(&[EVERY_QUEUE.into()], t0()).await.expect("due");
    let nowhere = store.has_due_work(&["z".into()], t0()).await.expect("due");
    assert_eq!((only_c, anywhere, nowhere), (true, true, false));
}
