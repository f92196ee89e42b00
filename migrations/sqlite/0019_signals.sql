-- Signals (issue 47): named messages sent to a task (`taskhost signal`), kept until a run of
-- the task reads one and ends well (`read_by_run`). A run that waits for one not yet sent ends
-- snoozed, its task marked with the name it awaits and the wait's timeout, so that sending it
-- makes the task due at once.
ALTER TABLE task_queue ADD COLUMN awaiting_signal TEXT;
ALTER TABLE task_queue ADD COLUMN awaiting_until TEXT;
CREATE TABLE task_signals (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    sent_on     TEXT    NOT NULL,
    read_by_run INTEGER
);
CREATE INDEX task_signals_task ON task_signals (task_id, name);
