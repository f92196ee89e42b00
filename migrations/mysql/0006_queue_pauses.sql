-- Paused queues: workers claim nothing from a queue listed here (they finish what they run).
CREATE TABLE task_queue_pauses (
    queue      VARCHAR(255) NOT NULL PRIMARY KEY,
    paused_on  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
