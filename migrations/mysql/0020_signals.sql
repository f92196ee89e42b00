-- Signals (issue 47): named messages sent to a task (`taskhost signal`), kept until a run of
-- the task reads one and ends well (`read_by_run`). A run that waits for one not yet sent ends
-- snoozed, its task marked with the name it awaits and the wait's timeout, so that sending it
-- makes the task due at once.
ALTER TABLE task_queue ADD COLUMN awaiting_signal VARCHAR(128) NULL, ADD COLUMN awaiting_until DATETIME(6) NULL;
CREATE TABLE task_signals (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id     BIGINT       NOT NULL,
    name        VARCHAR(128) NOT NULL,
    data        LONGTEXT     NOT NULL,
    sent_on     DATETIME(6)  NOT NULL,
    read_by_run BIGINT       NULL,
    KEY task_signals_task (task_id, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
