-- Flow-control limits kept in the database (issue 48): a queue's or a handler's row holds its
-- limits (runs in flight at most; starts per period, paced, with a burst) and the rate's pace
-- mark, which each claim moves on under the row's lock. `set_by`: `file` (a worker's start wrote
-- it from the operator's file) or `operator` (taskhost limits set, the API; a file does not
-- overwrite it). A row without limits is a lock row only.
ALTER TABLE task_run_limits
    ADD COLUMN max_running BIGINT,
    ADD COLUMN rate_count BIGINT,
    ADD COLUMN rate_period_us BIGINT,
    ADD COLUMN rate_burst BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN next_on TIMESTAMPTZ,
    ADD COLUMN set_by TEXT,
    ADD COLUMN updated_on TIMESTAMPTZ;
