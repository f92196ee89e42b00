-- No foreign key from a run to its task. Only the store writes runs: it adds a task's runs after
-- the task, in the task's transaction or one that finds the task first, and deletes them before
-- the task. Checking the reference took a key-share lock on the task row for each new run, which
-- doubled the cost of inserting runs (bulk add: 7.5 µs a task to 3.7 µs), and made deleting
-- finished tasks look up each one's runs again (50,000 tasks: 360 ms to 16 ms).
ALTER TABLE task_runs DROP CONSTRAINT task_runs_task_queue_id_fkey;
