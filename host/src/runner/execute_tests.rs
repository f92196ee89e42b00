//! The runner's execution of a run, tested without a database.

use super::*;

/// What a worker's runs share, with no database.
fn shared(progress_tx: mpsc::Sender<ProgressUpdate>) -> Shared {
    let sandbox =
        crate::sandbox::Sandbox::new(&crate::sandbox::SandboxConfig { pool_instances: 1, ..Default::default() })
            .expect("sandbox");
    let catalog = Arc::new(Catalog::new(Arc::new(sandbox), "/nonexistent", None, Default::default()));
    Shared {
        catalog,
        clock: Arc::new(crate::clock::SystemClock),
        backoff: Backoff::default(),
        progress_tx,
        memory: Arc::new(Semaphore::new(1)),
        memory_budget_mib: 1,
        put_backs: PutBacks::new(Duration::from_secs(600), Arc::new(crate::clock::SystemClock)),
        store: None,
    }
}

#[tokio::test]
async fn a_panic_while_running_ends_the_run_with_a_host_error() {
    let (progress_tx, _rx) = mpsc::channel(1);
    let shared = shared(progress_tx);
    let meta = RunMeta {
        run_id: 7,
        task_id: 3,
        task_runs_failed: 0,
        max_attempts: 5,
        backoff: BackoffSettings::default(),
        snoozes: 0,
        fuel_key: None,
        delete_on_success: false,
    };
    let Ran::Ended(o) = guarded(&shared, meta, Instant::now(), async { panic!("boom") }).await else {
        panic!("a panic ends the run")
    };
    assert_eq!((o.run_id, o.status()), (7, RunStatus::Error));
    let failure = o.failure().cloned().unwrap_or_else(|| Failure::host_error("none"));
    assert_eq!(failure.code, crate::sandbox::codes::HOST_ERROR);
    assert!(failure.message.contains("boom"), "{failure:?}");
    assert!(matches!(o.next(), Some(NextStep::RetryAt(_))), "a host error is retried");
}

#[tokio::test]
async fn a_runs_future_stays_a_few_kib_however_deep_its_run_goes() {
    // The run's own future (the sandbox's call among it) is boxed once; what the slot's task
    // holds and moves at each start is the rest. Unboxed, or passed by value through async fns
    // that keep their argument beside their own state, it was 19 KiB.
    let (progress_tx, _rx) = mpsc::channel(1);
    let shared = shared(progress_tx);
    let run = super::super::run_tasks::tests::claimed(1);
    let future = execute_guarded(&shared, run, Arc::new(Notify::new()));
    let bytes = std::mem::size_of_val(&future);
    assert!(bytes <= 4096, "a run's future is {bytes} bytes");
}
