-- Concurrency limits across workers: a claim touching a limited queue or handler locks its row
-- here (`queue:NAME`, `handler:NAME`), so such claims take turns, then counts the runs in flight
-- by the index below.
CREATE TABLE task_run_limits (
    name  TEXT PRIMARY KEY
);
CREATE INDEX task_queue_running ON task_queue (queue, task_handler_class) WHERE last_status = 'running';
