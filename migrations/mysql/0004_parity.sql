-- Parity with PostgreSQL (its 0003), so one schema description holds on every database
-- (src/store/schema.rs, checked by tests/schema.rs):
-- * at most one scheduled run per task: MySQL has no partial index, so a generated column holds
--   the task's id while the run is scheduled (NULL otherwise) and carries a unique index;
-- * no foreign key from a run to its runner: runners are never deleted, and the check cost every
--   claim a lookup;
-- * one name for the unique-key index, and one type for unbounded text (LONGTEXT).
ALTER TABLE task_runs
    ADD COLUMN scheduled_task_id BIGINT AS (CASE WHEN status = 'scheduled' THEN task_queue_id END) STORED,
    ADD UNIQUE KEY task_runs_scheduled (scheduled_task_id),
    DROP FOREIGN KEY task_runs_runner_fk,
    MODIFY error_message LONGTEXT NULL,
    MODIFY logs LONGTEXT NULL;
ALTER TABLE task_runs DROP KEY task_runs_runner_fk;
ALTER TABLE task_queue RENAME KEY task_queue_active_unique_key TO task_queue_active_unique;
ALTER TABLE task_runners MODIFY handlers LONGTEXT NULL;
