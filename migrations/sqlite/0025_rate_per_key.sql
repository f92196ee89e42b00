-- A rate per key (issue 48): a queue's `rate_limit_per_key` paces the starts of each key in
-- it apart (N per period, with a burst), as `rate_limit` paces the queue's. Each key's pace mark
-- in a queue is a row of `task_key_paces` (microseconds since the epoch), written only by the
-- claims, which hold the queue's row of `task_run_limits` (not in `task_keys`, which adds lock:
-- a claim would wait for an add, and an add waiting for a task a claim holds would deadlock).
-- A mark in the past allows what no mark does: such rows are deleted by the overseer.
ALTER TABLE task_run_limits ADD COLUMN rate_per_key_count INTEGER;
ALTER TABLE task_run_limits ADD COLUMN rate_per_key_period_us INTEGER;
ALTER TABLE task_run_limits ADD COLUMN rate_per_key_burst INTEGER NOT NULL DEFAULT 0;
CREATE TABLE task_key_paces (
    queue    TEXT NOT NULL,
    name     TEXT NOT NULL,
    next_us  INTEGER NOT NULL,
    PRIMARY KEY (queue, name)
);
CREATE INDEX task_key_paces_next ON task_key_paces (queue, next_us);
