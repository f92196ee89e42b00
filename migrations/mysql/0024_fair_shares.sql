-- Fair shares between keys (issue 48). A task may carry a key (`share_key`: a tenant, a
-- customer); a keyed task's due time is its turn, spaced from its key's previous turn by its
-- share, so the claims, in due order as ever, interleave keys. `task_keys` holds each key's last
-- turn in each queue, in nanoseconds since the epoch. A key's weight, and a queue's cap of runs in flight a key,
-- are limits (`key:NAME` rows; `max_running_per_key` on a queue's row).
ALTER TABLE task_queue ADD COLUMN share_key VARCHAR(255) NULL, ADD KEY task_queue_key (share_key, last_status);
CREATE TABLE task_keys (
    queue    VARCHAR(255) NOT NULL,
    name     VARCHAR(255) NOT NULL,
    turn_ns  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE task_run_limits
    ADD COLUMN weight BIGINT NULL,
    ADD COLUMN max_running_per_key BIGINT NULL;
