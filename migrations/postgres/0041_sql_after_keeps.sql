-- A task `taskhost_add` names in `after` is kept when it succeeds (issue 51, a queue that deletes
-- its successes), as one the host's add names is: its dependent's run may read its results. The
-- function writes its dependency rows `met = -1` for the intake; this trigger, once a statement,
-- locks those dependencies in id order (as the host's add and the worker's batches lock tasks, so
-- that they do not deadlock), refuses one a success deleted since the function's check (a lock
-- waits for that success's transaction, and then finds no row), and marks the others `keep_row`
-- in the add's own transaction: a success that would delete one waits for the add and then finds
-- it kept. It runs with its owner's rights (a role granted only what queueing needs writes it too)
-- over this schema's tables alone (`pg_temp` last).
CREATE FUNCTION taskhost_keep_after() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $fn$
DECLARE
    wanted  bigint;
    locked  bigint;
    missing bigint;
BEGIN
    SELECT count(DISTINCT a.after_id) INTO wanted FROM added a WHERE a.met < 0;
    IF wanted = 0 THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO locked FROM (
        SELECT t.id FROM task_queue t WHERE t.id IN (SELECT a.after_id FROM added a WHERE a.met < 0)
        ORDER BY t.id FOR UPDATE) AS s;
    IF locked < wanted THEN
        SELECT min(a.after_id) INTO missing FROM added a
        WHERE a.met < 0 AND NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a.after_id);
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid after: task %s is no longer there (its success deleted it)', missing);
    END IF;
    UPDATE task_queue SET keep_row = 1
    WHERE id IN (SELECT a.after_id FROM added a WHERE a.met < 0) AND keep_row IS NULL AND finished_on IS NULL;
    RETURN NULL;
END
$fn$;
DO $do$
BEGIN
    EXECUTE format('ALTER FUNCTION taskhost_keep_after() SET search_path = %I, pg_temp', current_schema());
END
$do$;
CREATE TRIGGER task_deps_keep_after AFTER INSERT ON task_deps
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION taskhost_keep_after();
