-- Concurrency limits across workers: a claim touching a limited queue or handler counts the
-- runs in flight by the index below. (SQLite's write transactions exclude each other, so the
-- lock rows other databases need stay unused here; the table keeps the schema one.)
CREATE TABLE task_run_limits (
    name  TEXT PRIMARY KEY
);
CREATE INDEX task_queue_running ON task_queue (queue, task_handler_class) WHERE last_status = 'running';
