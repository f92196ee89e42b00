-- Paused queues: workers claim nothing from a queue listed here (they finish what they run).
CREATE TABLE task_queue_pauses (
    queue      TEXT        PRIMARY KEY,
    paused_on  TIMESTAMPTZ NOT NULL
);
