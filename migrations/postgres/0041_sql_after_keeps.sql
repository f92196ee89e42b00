-- A task `taskhost_add` names in `after` is kept when it succeeds (issue 51, a queue that deletes
-- its successes), as one the host's add names is: its dependent's run may read its results. The
-- function writes its dependency rows `met = -1` for the intake; this trigger marks each such
-- dependency `keep_row` in the add's own transaction, taking its row's lock first (and refusing one a
-- success deleted since the function's check), so a success deleting it waits for the add and then
-- finds it kept. It runs with its owner's rights (a role granted
-- only what queueing needs writes it too) over this schema's tables alone (`pg_temp` last).
CREATE FUNCTION taskhost_keep_after() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $fn$
BEGIN
    -- Locked first: the function's check read without a lock, and a success may have deleted the
    -- task since (this waits for its transaction, and then finds no row).
    PERFORM 1 FROM task_queue WHERE id = NEW.after_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid after: task %s is no longer there (its success deleted it)', NEW.after_id);
    END IF;
    UPDATE task_queue SET keep_row = 1 WHERE id = NEW.after_id AND keep_row IS NULL AND finished_on IS NULL;
    RETURN NULL;
END
$fn$;
DO $do$
BEGIN
    EXECUTE format('ALTER FUNCTION taskhost_keep_after() SET search_path = %I, pg_temp', current_schema());
END
$do$;
CREATE TRIGGER task_deps_keep_after AFTER INSERT ON task_deps
    FOR EACH ROW WHEN (NEW.met < 0) EXECUTE FUNCTION taskhost_keep_after();
