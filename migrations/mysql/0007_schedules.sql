-- Periodic tasks: each schedule queues a task for every slot of its cron expression. last_slot is
-- the latest slot queued (or passed over); it is read and moved under the row's lock in the same
-- transaction as the task it queues, so each slot is queued once however many overseers race.
CREATE TABLE task_schedules (
    name               VARCHAR(128) NOT NULL PRIMARY KEY,
    cron               VARCHAR(255) NOT NULL,
    time_zone          VARCHAR(64) NOT NULL DEFAULT 'UTC',
    task_handler_class VARCHAR(255) NOT NULL,
    task_data          LONGTEXT NOT NULL,
    queue              VARCHAR(255) NOT NULL DEFAULT 'default',
    priority           BIGINT NOT NULL DEFAULT 0,
    missed             VARCHAR(16) NOT NULL DEFAULT 'once' CHECK (missed IN ('once', 'skip')),
    paused_on          DATETIME(6) NULL,
    last_slot          DATETIME(6) NOT NULL,
    created_on         DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
