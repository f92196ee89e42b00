//! The store suite: every backend must pass these, unchanged. A backend's test file calls
//! `store_suite!(open_expression)` with an async expression that opens a fresh, empty store.
#![allow(dead_code)]

mod basics;
mod components;
mod control;
mod deleted_successes;
mod dependencies;
mod fair;
mod key_backlog;
mod key_fuel;
mod lifecycle;
mod limits;
mod marker;
mod queues;
mod reads_and_upkeep;
mod release;
mod runners;
mod signals;
mod succeeded_runs;
mod unique;
mod workflows;
pub use basics::*;
pub use components::*;
pub use control::*;
pub use deleted_successes::*;
pub use dependencies::*;
pub use fair::*;
pub use key_backlog::*;
pub use key_fuel::*;
pub use lifecycle::*;
pub use limits::*;
pub use marker::*;
pub use queues::*;
pub use reads_and_upkeep::*;
pub use release::*;
pub use runners::*;
pub use signals::*;
pub use succeeded_runs::*;
pub use unique::*;
pub use workflows::*;

use std::time::Duration;

use chrono::{DateTime, Utc};
use taskhost::model::*;
use taskhost::sandbox::{ErrorSource, Failure, FailureKind};
use taskhost::store::{RetryPlan, SharedStore};

const DAY: Duration = Duration::from_secs(86_400);

fn t0() -> DateTime<Utc> {
    // Whole microseconds: every backend stores them exactly.
    DateTime::from_timestamp(1_790_000_000, 123_456_000).expect("valid time")
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

async fn runner(store: &SharedStore, now: DateTime<Utc>) -> RunnerId {
    store.register_runner(4242, "test-host", now, 100).await.expect("register runner")
}

/// The success of `c` at `now`, with `results`, as a worker writes it.
pub(crate) fn success(c: &ClaimedRun, now: DateTime<Utc>, results: &str) -> RunOutcome {
    RunOutcome {
        run_id: c.run_id,
        task_id: c.task_id,
        end: RunEnd::Success { results: Some(results.into()), children: Default::default() },
        percents_completed: Some(100),
        finished_on: now,
        duration_ms: 3,
        component_digest: Some("ab".repeat(32)),
        fuel_used: Some(1234),
        logs: None,
        fuel_key: None,
        delete_on_success: false,
    }
}

/// A failure of `c` at `now`, retryable, then `next`, as a worker writes it.
pub(crate) fn failure(c: &ClaimedRun, now: DateTime<Utc>, next: NextStep) -> RunOutcome {
    let failure = Failure {
        code: "boom".into(),
        message: "it broke".into(),
        retryable: true,
        source: ErrorSource::Guest,
        kind: FailureKind::Error,
    };
    RunOutcome {
        end: RunEnd::Failure { failure, partial_results: None, next },
        percents_completed: Some(40),
        ..success(c, now, "")
    }
}

/// Generates one test per suite function for a backend. `$open` is an async expression that
/// yields a fresh, empty `SharedStore`; `$open2` one on the same database (for concurrency).
#[macro_export]
macro_rules! store_suite {
    ($open:expr, $open_same:expr) => {
        macro_rules! case {
            ($name:ident) => {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (store, _guard) = $open.await;
                    suite::$name(store).await;
                }
            };
        }
        case!(adds_a_task_whose_first_run_is_made_by_its_claim);
        case!(adds_many_tasks_in_order);
        case!(a_task_due_in_2099_keeps_its_time_and_final_tasks_are_told_from_the_rest);
        case!(the_newest_task_id_follows_every_add);
        case!(a_commit_moves_the_change_marker);
        case!(claims_in_priority_then_fifo_order);
        case!(claims_only_due_tasks_of_the_given_queues);
        case!(respects_the_claim_limit);
        case!(a_large_claim_takes_each_task_once_with_its_own_run);
        case!(unique_key_returns_the_unfinished_task);
        case!(success_updates_the_run_and_the_task);
        case!(a_large_finish_writes_each_run_and_task_with_its_own_values);
        case!(a_finish_of_runs_in_as_many_queues_counts_each_queue);
        case!(a_failure_with_retry_schedules_the_next_attempt);
        case!(giving_up_makes_a_dead_letter_that_can_be_replayed);
        case!(a_succeeded_task_runs_again_as_a_new_attempt_keeping_its_runs);
        case!(a_snoozed_run_schedules_its_task_again_using_no_attempt);
        case!(a_runs_children_are_written_with_its_end_and_only_if_it_ended_well);
        case!(a_runs_join_waits_for_the_tasks_it_queued_before_it);
        case!(a_task_waits_unclaimed_until_each_task_it_runs_after_has_succeeded);
        case!(a_dependency_that_ends_badly_cancels_the_tasks_waiting_for_it_unless_they_run_anyway);
        case!(a_dependency_retried_while_a_task_waits_for_it_is_waited_for_again);
        case!(a_task_after_a_missing_or_dead_task_is_refused_and_nothing_is_added);
        case!(a_join_reads_the_results_of_the_tasks_it_runs_after_within_its_bytes);
        case!(a_signal_makes_the_task_awaiting_it_due_at_once_and_is_read_once);
        case!(a_signal_sent_before_the_wait_is_kept_and_a_failed_run_leaves_it_unread);
        case!(a_signal_to_a_finished_or_unknown_task_is_refused);
        case!(cancelling_with_children_reaches_every_unfinished_task_under_it);
        case!(a_late_outcome_does_not_override_a_timeout);
        case!(timed_out_runners_take_their_runs_with_them);
        case!(the_runner_limit_is_enforced);
        case!(rotation_deletes_only_old_successes_in_batches);
        case!(a_lease_has_one_holder_until_it_expires);
        case!(a_lease_handed_back_is_free_at_once_and_only_by_its_holder);
        case!(a_run_put_back_is_scheduled_again_uncounted);
        case!(one_release_call_ends_puts_back_and_keeps_a_stopped_runs_record);
        case!(tasks_are_listed_by_status_queue_handler_and_death_oldest_first);
        case!(progress_counts_while_running_and_not_after_the_end);
        case!(due_work_counts_due_running_and_retry_awaiting_tasks_of_the_handlers);
        case!(long_texts_are_stored_whole);
        case!(runners_beat_finish_and_are_seen);
        case!(due_tasks_nobody_serves_are_given_up);
        case!(failed_tasks_are_planned_once);
        case!(a_late_outcome_of_a_run_put_back_is_ignored);
        case!(queues_are_paused_resumed_and_listed);
        case!(queues_holding_scheduled_tasks_are_listed_and_each_counts_the_live_runners_claiming_from_it);
        case!(dead_letters_are_replayed_and_finished_tasks_deleted_in_bulk);
        case!(schedules_queue_each_slot_once_even_when_overseers_race);
        case!(cancelled_tasks_never_run_and_their_late_outcomes_are_ignored);
        case!(declared_schedules_follow_the_declaration_and_leave_hand_made_ones);
        case!(statistics_count_runs_as_they_end_and_outlive_rotation);
        case!(a_unique_key_stays_taken_in_the_states_its_task_asked_for);
        case!(a_unique_key_is_let_go_once_its_period_has_passed);
        case!(a_batch_of_successes_is_counted_under_each_runs_handler_queue_and_runner);
        case!(claims_keep_runs_in_flight_within_the_queue_and_handler_limits);
        case!(rate_limits_pace_starts_across_runners_and_say_when_the_next_is_allowed);
        case!(limits_are_set_live_and_a_file_does_not_overwrite_an_operators);
        case!(a_claim_that_takes_nothing_uses_no_start_of_a_rate);
        case!(a_key_that_comes_later_takes_turns_with_a_keys_backlog);
        case!(a_keys_weight_gives_it_that_many_turns_to_another_keys_one);
        case!(a_queue_capped_per_key_holds_each_key_to_its_cap_across_runners);
        case!(a_full_keys_backlog_holds_back_neither_other_keys_nor_its_own_other_queues);
        case!(a_new_key_starts_where_its_handlers_claims_are_not_at_an_unserved_task);
        case!(a_turn_earlier_than_its_queueing_does_not_make_a_task_look_unserved);
        case!(a_rate_per_key_paces_each_key_apart_across_runners);
        case!(tasks_that_fit_behind_a_deep_backlog_of_keys_out_of_room_are_reached_in_a_few_claims);
        case!(tasks_that_fit_amid_a_backlog_of_full_keys_and_other_handlers_tasks_are_all_reached);
        case!(a_queue_where_nothing_fits_is_left_unread_a_while_but_an_add_or_a_freed_key_is_seen_at_once);
        case!(a_paced_queue_where_nothing_fits_is_left_unread_until_its_first_key_may_start);
        case!(a_key_whose_runs_burn_ten_times_the_fuel_gets_a_tenth_of_the_turns);
        case!(a_keys_backlog_queued_before_its_runs_ended_is_laid_again_by_their_fuel);
        case!(a_keys_weight_changed_live_lays_its_queued_tasks_again);
        case!(a_queues_fuel_per_turn_changed_live_lays_its_keys_queued_tasks_again);
        case!(what_each_key_holds_and_what_each_limit_holds_back_are_listed);
        case!(deployed_versions_are_stored_in_pieces_released_in_order_and_rolled_back);
        case!(a_claim_names_the_version_its_handlers_newest_release_made_active);
        case!(versions_superseded_before_the_retention_are_retired_unless_active_or_pinned);
        case!(every_transition_is_made_from_the_states_it_may_start_from_and_refused_from_the_others);
        case!(a_running_run_is_written_once_as_it_ended_and_ids_are_never_given_twice);
        case!(one_claim_gives_each_run_its_own_timeout_and_each_success_its_own_finish_time);
        case!(a_claim_of_ten_thousand_and_more_gives_every_task_a_run_of_its_own);
        case!(a_run_that_succeeded_reads_the_same_everywhere_and_a_replay_keeps_it);
        case!(a_queues_on_success_is_set_read_and_taken_out_as_its_other_limits);
        case!(a_success_that_deletes_its_task_leaves_its_end_for_the_stream_the_counts_and_after);
        case!(a_task_something_reads_again_is_kept_when_its_success_would_delete_it);
        case!(the_ends_of_a_batch_across_spans_of_ids_are_each_found_by_id);

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_claims_never_share_a_run() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::concurrent_claims_never_share_a_run(a, b).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn deploys_of_one_component_at_once_store_it_once() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::deploys_of_one_component_at_once_store_it_once(a, b).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_limited_claims_never_exceed_the_limit() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::concurrent_limited_claims_never_exceed_the_limit(a, b).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_rate_limited_claims_never_exceed_the_rate() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::concurrent_rate_limited_claims_never_exceed_the_rate(a, b).await;
        }
    };
}

/// The tests a database server's store runs besides the suite: migrating twice, an unreachable
/// server, and queueing inside the caller's transaction. `$scratch` yields a fresh database's
/// URL (a guard), `$store` is the backend's store type, `$nowhere` a URL where nothing listens,
/// `$waiting` a query counting claims that wait on a runner's row lock.
#[macro_export]
macro_rules! server_store_suite {
    ($scratch:expr, $store:ty, $nowhere:literal, $waiting:literal) => {
        async fn open() -> (SharedStore, common::ScratchDb) {
            let scratch = $scratch.await;
            (open_same(&scratch).await, scratch)
        }

        async fn open_same(url: &str) -> SharedStore {
            store::open(url, &StoreOptions::default()).await.expect("open the store")
        }

        store_suite!(open(), open_same);

        #[tokio::test]
        async fn migrating_twice_is_harmless() {
            let (store, _url) = open().await;
            store.migrate().await.expect("second migration");
        }

        #[tokio::test]
        async fn an_unreachable_server_is_a_clear_error() {
            let err = store::open($nowhere, &StoreOptions::default())
                .await
                .expect_err("nothing listens on port 1")
                .to_string();
            assert!(err.contains("cannot connect"), "{err}");
        }

        #[tokio::test]
        async fn tasks_can_be_queued_inside_the_callers_own_transaction() {
            use taskhost::model::NewTask;
            let scratch = $scratch.await;
            let store = <$store>::connect(&scratch, &StoreOptions::default()).await.expect("connect");
            taskhost::store::Store::migrate(&store).await.expect("migrate");
            let shared: SharedStore = store.shared();
            suite::tasks_queued_in_the_callers_transaction_share_its_fate(shared, |commit| {
                let store = store.clone();
                async move {
                    let mut tx = store.pool().begin().await.expect("begin");
                    let added = <$store>::add_tasks_in(&mut tx, &[NewTask::new("mail", "{}")], chrono::Utc::now())
                        .await
                        .expect("add");
                    if commit {
                        tx.commit().await.expect("commit")
                    } else {
                        tx.rollback().await.expect("rollback")
                    }
                    added[0].id
                }
            })
            .await;
        }

        /// A store on a new database holding one due task, and a runner registered for it.
        async fn one_task_and_a_runner() -> (common::ScratchDb, $store, SharedStore, chrono::DateTime<chrono::Utc>, i64) {
            use taskhost::model::NewTask;
            let scratch = $scratch.await;
            let raw = <$store>::connect(&scratch, &StoreOptions::default()).await.expect("connect");
            taskhost::store::Store::migrate(&raw).await.expect("migrate");
            let store: SharedStore = raw.shared();
            let now = chrono::Utc::now();
            store.add_tasks(&[NewTask::new("h", "{}")], now).await.expect("add");
            let runner = store.register_runner(1, "elsewhere", now, 10).await.expect("register");
            (scratch, raw, store, now, runner)
        }

        /// A claim for `runner`, once it waits on its runner's row (which the caller holds locked).
        async fn claim_waiting_on_its_runner(
            raw: &$store,
            store: &SharedStore,
            runner: i64,
            now: chrono::DateTime<chrono::Utc>,
        ) -> tokio::task::JoinHandle<taskhost::Result<Vec<taskhost::model::ClaimedRun>>> {
            let claim = tokio::spawn({
                let store = store.clone();
                async move { store.claim(runner, &["default".into()], 10, now, std::time::Duration::from_secs(60)).await }
            });
            common::wait_until(std::time::Duration::from_secs(30), "the claim waits on its runner's row", || async {
                assert!(!claim.is_finished(), "the claim did not wait on its runner's row");
                // (MySQL fails a read of its processlist while another connection's statement
                // is not utf8mb3 text: not seen yet, read again.)
                sqlx::query_scalar::<_, i64>($waiting).fetch_one(raw.pool()).await.is_ok_and(|n| n > 0)
            })
            .await;
            claim
        }

        /// A claim that reaches the server while its runner is being timed out (sent before a
        /// partition, say, and delivered after it healed) waits for the time-out, then claims
        /// nothing: before, it took runs for a dead runner that nothing would ever end.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_claim_that_meets_its_runners_time_out_waits_for_it_and_then_claims_nothing() {
            let (_scratch, raw, store, now, runner) = one_task_and_a_runner().await;
            // The overseer's time-out, held open: the runner's row is changed, not yet committed.
            let mut tx = raw.pool().begin().await.expect("begin");
            let mark = format!("UPDATE task_runners SET status = 'timeout' WHERE id = {runner}");
            sqlx::query(&mark).execute(&mut *tx).await.expect("mark");
            let claim = claim_waiting_on_its_runner(&raw, &store, runner, now).await;
            tx.commit().await.expect("commit");
            let claimed = claim.await.expect("join").expect("claim");
            assert!(claimed.is_empty(), "claimed {claimed:?} for a runner timed out");
            let other = store.register_runner(2, "elsewhere", now, 10).await.expect("register");
            let runs = store.claim(other, &["default".into()], 10, now, std::time::Duration::from_secs(60)).await;
            assert_eq!(runs.expect("claim").len(), 1, "the task waits for a live runner");
        }

        /// A claim held up after its pick (here by a lock on its runner's row; in the chaos test by
        /// a partition) holds up no enqueue: on MySQL, under REPEATABLE READ, the pick that reached
        /// the end of the due tasks locked the gap every new task goes into, until its commit.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_enqueue_does_not_wait_for_a_claim_in_flight() {
            use taskhost::model::NewTask;
            let (_scratch, raw, store, now, runner) = one_task_and_a_runner().await;
            let mut tx = raw.pool().begin().await.expect("begin");
            let hold = format!("UPDATE task_runners SET heartbeat_on = heartbeat_on WHERE id = {runner}");
            sqlx::query(&hold).execute(&mut *tx).await.expect("hold the runner's row");
            let claim = claim_waiting_on_its_runner(&raw, &store, runner, now).await;
            // Well within the server's lock wait timeout (50 s by default), which it waited before.
            let added = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                store.add_tasks(&[NewTask::new("h", "{}"), NewTask::new("h", "{}")], now),
            )
            .await
            .expect("the enqueue waited for the claim")
            .expect("add");
            assert_eq!(added.len(), 2);
            tx.commit().await.expect("commit");
            let claimed = claim.await.expect("join").expect("claim");
            assert_eq!(claimed.len(), 1, "the claim goes on once its runner's row is free: {claimed:?}");
        }
    };
}
