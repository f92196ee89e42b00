-- A success reads the tasks waiting for it by a locking read of `task_deps` (`after_id IN (…)
-- AND met = 0 … FOR UPDATE`), which on MariaDB waits for every row of that task it scans that
-- another transaction has not committed: a dependency row `taskhost_add` wrote (`met = -1`, for
-- the intake) in an application's transaction still open held back the success, and its
-- worker's whole batch of successes, until that transaction ended. The index leads with the
-- task and then `met`, so the read scans the rows `met = 0` alone. (PostgreSQL's locking reads
-- skip rows not committed; SQLite has no row locks.)
ALTER TABLE task_deps DROP INDEX task_deps_after, ADD INDEX task_deps_after (after_id, met);
