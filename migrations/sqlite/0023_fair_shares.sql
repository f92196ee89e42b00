-- Fair shares between keys (issue 48). A task may carry a key (`share_key`: a tenant, a
-- customer); a keyed task's due time is its turn, spaced from its key's previous turn by its
-- share, so the claims, in due order as ever, interleave keys. `task_keys` holds each key's last
-- turn in each queue, in nanoseconds since the epoch. A key's weight, and a queue's cap of runs in flight a key,
-- are limits (`key:NAME` rows; `max_running_per_key` on a queue's row).
ALTER TABLE task_queue ADD COLUMN share_key TEXT;
CREATE INDEX task_queue_key ON task_queue (share_key, last_status) WHERE share_key IS NOT NULL;
CREATE TABLE task_keys (
    queue    TEXT NOT NULL,
    name     TEXT NOT NULL,
    turn_ns  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, name)
);
ALTER TABLE task_run_limits ADD COLUMN weight INTEGER;
ALTER TABLE task_run_limits ADD COLUMN max_running_per_key INTEGER;
