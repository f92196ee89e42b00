-- A task the documented INSERT into `taskhost_add` names in `after` is kept when it succeeds
-- (issue 51, a queue that deletes its successes), as one the host's add names is: its dependent's
-- run may read its results. The view's trigger writes the dependency rows `met = -1` for the
-- intake; this one marks each such dependency `keep_row` in the same write.
CREATE TRIGGER task_deps_keep_after AFTER INSERT ON task_deps WHEN NEW.met < 0
BEGIN
    UPDATE task_queue SET keep_row = 1 WHERE id = NEW.after_id AND keep_row IS NULL AND finished_on IS NULL;
END;
