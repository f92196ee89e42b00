//! Every index of the schema (see the parent module for how each database makes them).

use super::parts::*;
use Kind::*;

/// Every index, on every database.
pub const INDEXES: &[Index] = &[
    Index {
        name: "task_runners_live",
        table: "task_runners",
        columns: &["status", "heartbeat_on"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    Index {
        name: "task_queue_claim",
        table: "task_queue",
        columns: &["queue", "priority", "scheduled_on", "id"],
        unique: false,
        filter: Some("last_status = 'scheduled'"),
        mysql: OnMySql::Columns(&["last_status", "queue", "priority", "scheduled_on", "id"]),
    },
    Index {
        name: "task_queue_failed",
        table: "task_queue",
        columns: &["scheduled_on"],
        unique: false,
        filter: Some("last_status IN ('error', 'timeout') AND gave_up_on IS NULL"),
        mysql: OnMySql::Generated {
            column: "failed_scheduled_on",
            kind: Time,
            expression: "CASE WHEN last_status IN ('error', 'timeout') AND gave_up_on IS NULL THEN scheduled_on END",
            then: &[],
        },
    },
    Index {
        name: "task_queue_done",
        table: "task_queue",
        columns: &["finished_on"],
        unique: false,
        filter: Some("last_status IN ('success', 'cancelled')"),
        // Unfinished tasks have no `finished_on`: the rest are failed tasks given up on, which
        // the queries' condition leaves out.
        mysql: OnMySql::Same,
    },
    // Dead letters by when they died (the event stream's finished tasks).
    Index {
        name: "task_queue_dead",
        table: "task_queue",
        columns: &["finished_on"],
        unique: false,
        filter: Some("gave_up_on IS NOT NULL"),
        mysql: OnMySql::Covered("task_queue_done"),
    },
    // Uniqueness of a key while its task is unfinished (the column is NULL once finished).
    Index {
        name: "task_queue_active_unique",
        table: "task_queue",
        columns: &["active_unique_key"],
        unique: true,
        filter: Some("active_unique_key IS NOT NULL"),
        mysql: OnMySql::Same,
    },
    Index {
        name: "task_runs_task",
        table: "task_runs",
        columns: &["task_queue_id"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    // Runs in flight, counted by queue and by handler for the concurrency limits, and found by
    // the overseer (overdue, or of a lost runner) and by their workers: they are few.
    Index {
        name: "task_queue_running",
        table: "task_queue",
        columns: &["queue", "task_handler_class"],
        unique: false,
        filter: Some("last_status = 'running'"),
        mysql: OnMySql::Covered("task_queue_claim"),
    },
    // A key's scheduled tasks (its due tasks, its turns pruned, its counts; running ones are read
    // by `task_queue_running`). By key, the state only in the filter: as a column it would move a
    // keyed task's entry at each claim and end (a claim 1.3 times as dear at 10,000 keys); and
    // scheduled only, since PostgreSQL writes an entry in each index whose filter the row meets
    // at every update that is not HOT (a keyed drain 86 - 96 % of a keyless one with the index
    // holding every keyed task). MySQL's is by key alone: an update that keeps the key leaves it.
    Index {
        name: "task_queue_key",
        table: "task_queue",
        columns: &["share_key"],
        unique: false,
        filter: Some("share_key IS NOT NULL AND last_status = 'scheduled'"),
        mysql: OnMySql::Same,
    },
    // A queue's keys by pace mark: the first that may start again.
    Index {
        name: "task_key_paces_next",
        table: "task_key_paces",
        columns: &["queue", "next_us"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    // The tasks pinned to a version (counted by `taskhost versions`, kept by rotation).
    Index {
        name: "task_queue_pinned",
        table: "task_queue",
        columns: &["pinned_digest"],
        unique: false,
        filter: Some("pinned_digest IS NOT NULL"),
        mysql: OnMySql::Same,
    },
    // A handler's newest release (its active version), read by each claim.
    Index {
        name: "task_handler_releases_handler",
        table: "task_handler_releases",
        columns: &["handler", "id"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    // A task's children (tasks its runs queued).
    Index {
        name: "task_queue_parent",
        table: "task_queue",
        columns: &["parent_id"],
        unique: false,
        filter: Some("parent_id IS NOT NULL"),
        mysql: OnMySql::Same,
    },
    // Tasks queued in SQL waiting for the intake (`overseer/intake.rs`).
    Index {
        name: "task_queue_arriving",
        table: "task_queue",
        columns: &["id"],
        unique: false,
        filter: Some("last_status = 'waiting' AND waiting_for < 0"),
        mysql: OnMySql::Generated {
            column: "arriving",
            kind: Int,
            expression: "CASE WHEN last_status = 'waiting' AND waiting_for < 0 THEN 1 END",
            then: &[],
        },
    },
    // The tasks waiting for a task, found when it ends. On MySQL with `met` too: the end's locking
    // read of the rows `met = 0` then passes by rows an open transaction wrote for the intake
    // (`met = -1`, `taskhost_add`'s), which it would otherwise wait for (mysql 0045).
    Index {
        name: "task_deps_after",
        table: "task_deps",
        columns: &["after_id"],
        unique: false,
        filter: None,
        mysql: OnMySql::Columns(&["after_id", "met"]),
    },
    // The ends of tasks deleted on success, by when (the event stream's, and rotation's).
    Index {
        name: "task_ends_finished",
        table: "task_ends",
        columns: &["finished_on"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    // A task's signals, by name.
    Index {
        name: "task_signals_task",
        table: "task_signals",
        columns: &["task_id", "name"],
        unique: false,
        filter: None,
        mysql: OnMySql::Same,
    },
    // One row of statistics a handler, queue, minute and runner.
    Index {
        name: "task_stats_key",
        table: "task_stats",
        columns: &["handler", "queue", "bucket", "runner"],
        unique: true,
        filter: None,
        mysql: OnMySql::Same,
    },
];
