//! The schema, described once: every table, column, index and unique constraint the migrations
//! of each database must produce. `tests/it/schema.rs` reads each live database's catalog and checks
//! it against this description, so the three folders of migrations cannot drift apart.
//!
//! Column kinds map to one type per database:
//!
//! | kind | PostgreSQL | SQLite | MySQL / MariaDB |
//! |---|---|---|---|
//! | `Id` | `bigint` (identity from a sequence) | `INTEGER PRIMARY KEY AUTOINCREMENT` | `bigint AUTO_INCREMENT` |
//! | `Int` | `bigint` | `INTEGER` | `bigint` |
//! | `Time` | `timestamptz` | `TEXT` (UTC, fixed width) | `datetime(6)` (UTC) |
//! | `Str(n)` | `text` | `TEXT` | `varchar(n)` (binary collation) |
//! | `Text` | `text` | `TEXT` | `longtext` |
//!
//! `Str(n)` is text of at most `n` characters, checked before it is written
//! ([`crate::client::Client::validate`] for what callers send; the host bounds what it writes):
//! MySQL needs the bound to index it, the others store it as plain text.
//!
//! Indexes are the same on PostgreSQL and SQLite (partial where it pays). MySQL has no partial
//! indexes. There a partial index becomes an index on a generated column that is NULL outside
//! the filter, or one that leads with its status column, or is left to another index that leads
//! with the status. Each index holding a status is rewritten by every change of that status (two
//! a run on the hot path, a claim and a finish): with the status in all four of `task_queue`'s
//! and three of `task_runs`' indexes, that upkeep was most of MariaDB's time a task. A generated
//! column changes only when the run enters or leaves the filter's state, and a plain column
//! such as `finished_on` only when it is written.

mod indexes;
mod parts;
pub use indexes::INDEXES;
pub use parts::*;
use parts::{col, def, null};

use Kind::*;

/// Status words are at most this long.
const STATUS: Kind = Str(16);
/// Names, queues, unique keys, host names: at most 255 characters.
const NAME: Kind = Str(255);
/// A sha256, in hex.
const DIGEST: Kind = Str(64);

/// Every table, on every database.
pub const TABLES: &[Table] = &[
    Table {
        name: "task_runners",
        columns: &[
            col("id", Id),
            col("process_id", Int),
            col("host_name", NAME),
            col("started_on", Time),
            null("finished_on", Time),
            def("status", STATUS, "running"),
            col("heartbeat_on", Time),
            null("handlers", Text),
            null("queues", Text),
        ],
    },
    Table {
        name: "task_queue",
        columns: &[
            col("id", Id),
            col("queued_on", Time),
            null("queued_by_id", NAME),
            col("scheduled_on", Time),
            col("task_handler_class", NAME),
            col("task_data", Text),
            def("last_status", STATUS, "scheduled"),
            def("max_retries", Int, "5"),
            def("task_runs_failed", Int, "0"),
            def("queue", NAME, "default"),
            def("priority", Int, "0"),
            null("unique_key", NAME),
            null("active_unique_key", NAME),
            null("run_timeout", Int),
            null("backoff_base_ms", Int),
            null("backoff_max_ms", Int),
            null("finished_on", Time),
            null("gave_up_on", Time),
            // The running run, kept on its task while it runs (meaningful only while the task is
            // running; see `store::transitions`), and the attempt of the task's latest run.
            null("run_id", Int),
            def("run_attempt", Int, "0"),
            null("run_runner_id", Int),
            null("run_started_on", Time),
            null("run_timeout_on", Time),
            null("run_percent", Int),
            null("run_results", Text),
            // Times it snoozed (`[tasks] max_snoozes`).
            def("snoozes", Int, "0"),
            // The task whose run queued it, and how deep it is under tasks queued by runs.
            null("parent_id", Int),
            def("depth", Int, "0"),
            // A waiting task: how many of the tasks it runs after have not yet succeeded, and
            // whether one that ends badly lets it run all the same.
            def("waiting_for", Int, "0"),
            def("run_anyway", Int, "0"),
            // The signal its last run waits for, and when that wait times out.
            null("awaiting_signal", Str(128)),
            null("awaiting_until", Time),
            null("unique_until", Time),
            null("unique_states", Str(16)),
            // The key whose share it is taken in (`transitions::fair`).
            null("share_key", NAME),
            // The version its runs run (issue 49), when it is pinned to one.
            null("pinned_digest", DIGEST),
            // A run that succeeded, kept on its task's row instead of `task_runs` while the task
            // stays succeeded (set exactly then: see `store::transitions`).
            null("run_duration_ms", Int),
            null("run_digest", DIGEST),
            null("run_fuel_used", Int),
            null("run_logs", Text),
            // Set (1) on a task that a wait, a dependent or a signal names: kept when it succeeds
            // in a queue that deletes its successes (`transitions::ends`).
            null("keep_row", Int),
        ],
    },
    // The tasks a queue that deletes its successes deleted, a row a batch, queue, handler and span
    // (keyed by its greatest id): what the event stream, the counts and a later `after` read of
    // them; rotated as finished tasks are (`transitions::ends`).
    Table {
        name: "task_ends",
        columns: &[
            col("max_id", Int),
            col("finished_on", Time),
            col("queue", NAME),
            col("task_handler_class", NAME),
            col("n", Int),
            col("min_id", Int),
            col("ids_sum", Int),
            col("ids", Text),
        ],
    },
    // Signals sent to a task, kept until a run reads one and ends well (`read_by_run`).
    Table {
        name: "task_signals",
        columns: &[
            col("id", Id),
            col("task_id", Int),
            col("name", Str(128)),
            col("data", Text),
            col("sent_on", Time),
            null("read_by_run", Int),
        ],
    },
    // What a task runs after: one row a dependency, `met` once it no longer holds the task back.
    Table { name: "task_deps", columns: &[col("task_id", Int), col("after_id", Int), def("met", Int, "0")] },
    Table {
        name: "task_runs",
        columns: &[
            col("id", Id),
            col("task_queue_id", Int),
            col("attempt", Int),
            col("created_on", Time),
            null("started_on", Time),
            def("percents_completed", Int, "0"),
            null("finished_on", Time),
            null("results", Text),
            def("status", STATUS, "scheduled"),
            null("error_code", NAME),
            null("error_message", Text),
            null("task_runner_id", Int),
            null("timeout_on", Time),
            null("duration_ms", Int),
            null("component_digest", Str(64)),
            null("fuel_used", Int),
            null("logs", Text),
        ],
    },
    // Counters: `task_runs`, the last run id handed out (SQLite and MySQL; PostgreSQL takes
    // run ids from the table's sequence).
    Table { name: "task_counters", columns: &[col("name", Str(64)), col("v", Int)] },
    Table { name: "task_leases", columns: &[col("name", Str(64)), col("holder", NAME), col("expires_on", Time)] },
    Table { name: "task_queue_pauses", columns: &[col("queue", NAME), col("paused_on", Time)] },
    // One row per flow-control limit (`queue:NAME`, `handler:NAME`): its limits, its rate's
    // pace mark, and the row the claims of the limit lock.
    Table {
        name: "task_run_limits",
        columns: &[
            col("name", Str(160)),
            null("max_running", Int),
            null("rate_count", Int),
            null("rate_period_us", Int),
            def("rate_burst", Int, "0"),
            null("next_on", Time),
            null("set_by", Str(16)),
            null("updated_on", Time),
            null("weight", Int),
            null("max_running_per_key", Int),
            null("rate_per_key_count", Int),
            null("rate_per_key_period_us", Int),
            def("rate_per_key_burst", Int, "0"),
            null("fuel_per_turn", Int),
            // `delete`: a success deletes its task where nothing reads it again (NULL: kept).
            null("on_success", Str(16)),
        ],
    },
    // Each key's last turn in each queue, in nanoseconds since the epoch (`transitions::fair`).
    Table { name: "task_keys", columns: &[col("queue", NAME), col("name", NAME), def("turn_ns", Int, "0")] },
    // Each key's pace mark in a queue paced per key, in microseconds since the epoch.
    Table { name: "task_key_paces", columns: &[col("queue", NAME), col("name", NAME), col("next_us", Int)] },
    // Each key's fuel a run on average in a queue weighed by fuel, and its runs counted.
    Table {
        name: "task_key_fuel",
        columns: &[col("queue", NAME), col("name", NAME), col("fuel", Int), col("runs", Int), null("laid_fuel", Int)],
    },
    // Keys whose weight, or whose queue's fuel per turn, changed while they had turns there: the
    // weight and fuel per turn those were laid by (NULL: the one now), and the changes asked
    // (`store/shared/relay.rs`).
    Table {
        name: "task_key_relays",
        columns: &[
            col("queue", NAME),
            col("name", NAME),
            null("laid_weight", Int),
            col("asked", Int),
            null("laid_per_turn", Int),
        ],
    },
    // Components published into the database (`taskhost deploy`), by digest, in pieces.
    Table {
        name: "task_components",
        columns: &[col("digest", DIGEST), col("size", Int), col("pieces", Int), col("stored_on", Time)],
    },
    Table { name: "task_component_pieces", columns: &[col("digest", DIGEST), col("piece", Int), col("data", Bytes)] },
    // A handler's versions, and its releases (deploys and rollbacks) in order: the newest is active.
    Table {
        name: "task_handler_versions",
        columns: &[
            col("handler", NAME),
            col("digest", DIGEST),
            null("manifest", Text),
            col("deployed_on", Time),
            col("deployed_by", NAME),
        ],
    },
    Table {
        name: "task_handler_releases",
        columns: &[
            col("id", Id),
            col("handler", NAME),
            col("digest", DIGEST),
            col("released_on", Time),
            col("released_by", NAME),
            col("action", STATUS),
        ],
    },
    Table {
        name: "task_schedules",
        columns: &[
            col("name", Str(128)),
            col("cron", NAME),
            def("time_zone", Str(64), "UTC"),
            col("task_handler_class", NAME),
            col("task_data", Text),
            def("queue", NAME, "default"),
            def("priority", Int, "0"),
            def("missed", STATUS, "once"),
            null("paused_on", Time),
            col("last_slot", Time),
            col("created_on", Time),
            def("declared", Int, "0"),
        ],
    },
    Table {
        name: "task_stats",
        columns: &[
            col("handler", NAME),
            col("queue", NAME),
            col("bucket", Time),
            col("runner", Int),
            def("succeeded", Int, "0"),
            def("failed", Int, "0"),
            def("timed_out", Int, "0"),
            def("cancelled", Int, "0"),
            def("timed", Int, "0"),
            def("duration_sum", Int, "0"),
            def("duration_max", Int, "0"),
            def("fueled", Int, "0"),
            def("fuel_sum", Int, "0"),
            def("fuel_max", Int, "0"),
            col("first_on", Time),
            col("last_on", Time),
            def("d0", Int, "0"),
            def("d1", Int, "0"),
            def("d2", Int, "0"),
            def("d3", Int, "0"),
            def("d4", Int, "0"),
            def("d5", Int, "0"),
            def("d6", Int, "0"),
            def("d7", Int, "0"),
            def("d8", Int, "0"),
            def("d9", Int, "0"),
            def("d10", Int, "0"),
            def("d11", Int, "0"),
            def("d12", Int, "0"),
            def("d13", Int, "0"),
            def("d14", Int, "0"),
            def("d15", Int, "0"),
            def("snoozed", Int, "0"),
        ],
    },
];

#[cfg(test)]
mod tests;
