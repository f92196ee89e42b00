-- No foreign key from a run to its task, as on PostgreSQL (its 0012 says why): only the store
-- writes runs, adding them after their task and deleting them before it.
ALTER TABLE task_runs DROP FOREIGN KEY task_runs_task_fk;
