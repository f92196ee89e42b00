-- Periodic tasks: each schedule queues a task for every slot of its cron expression. last_slot is
-- the latest slot queued (or passed over); it is read and moved under the row's lock in the same
-- transaction as the task it queues, so each slot is queued once however many overseers race.
CREATE TABLE task_schedules (
    name               TEXT NOT NULL PRIMARY KEY,
    cron               TEXT NOT NULL,
    time_zone          TEXT NOT NULL DEFAULT 'UTC',
    task_handler_class TEXT NOT NULL,
    task_data          TEXT NOT NULL,
    queue              TEXT NOT NULL DEFAULT 'default',
    priority           BIGINT NOT NULL DEFAULT 0,
    missed             TEXT NOT NULL DEFAULT 'once' CHECK (missed IN ('once', 'skip')),
    paused_on          TIMESTAMPTZ NULL,
    last_slot          TIMESTAMPTZ NOT NULL,
    created_on         TIMESTAMPTZ NOT NULL
);
