-- The queues each runner claims from: a JSON list of names, ["*"] for every queue; NULL: not
-- reported (an older host, or the moment between registering and saying). `taskhost queues`, the
-- dashboard and the overseer name a queue with due tasks that no live runner claims from.
ALTER TABLE task_runners ADD COLUMN queues LONGTEXT NULL;
