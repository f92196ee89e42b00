-- A task's runs are made by the claims that start them, never before: a retry, a replay or a
-- run put back is the task scheduled again, and the claim that starts it makes its run. The
-- scheduled runs left by earlier versions say nothing their tasks do not (each such task is
-- scheduled, due at its scheduled_on), and the claim no longer looks for them.
DELETE FROM task_runs WHERE status = 'scheduled';
DROP INDEX task_runs_scheduled;
