-- Concurrency limits across workers: a claim touching a limited queue or handler locks its row
-- here (`queue:NAME`, `handler:NAME`), so such claims take turns, then counts the runs in flight
-- (a queue's by task_queue_claim, which leads with the status; a handler's by the index below).
CREATE TABLE task_run_limits (
    name  VARCHAR(160) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE task_queue ADD KEY task_queue_running (last_status, task_handler_class);
