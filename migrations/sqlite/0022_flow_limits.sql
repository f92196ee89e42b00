-- Flow-control limits kept in the database (issue 48): a queue's or a handler's row holds its
-- limits (runs in flight at most; starts per period, paced, with a burst) and the rate's pace
-- mark, which each claim moves on in its write transaction. `set_by`: `file` (a worker's start
-- wrote it from the operator's file) or `operator` (taskhost limits set, the API; a file does
-- not overwrite it).
ALTER TABLE task_run_limits ADD COLUMN max_running INTEGER;
ALTER TABLE task_run_limits ADD COLUMN rate_count INTEGER;
ALTER TABLE task_run_limits ADD COLUMN rate_period_us INTEGER;
ALTER TABLE task_run_limits ADD COLUMN rate_burst INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_run_limits ADD COLUMN next_on TEXT;
ALTER TABLE task_run_limits ADD COLUMN set_by TEXT;
ALTER TABLE task_run_limits ADD COLUMN updated_on TEXT;
