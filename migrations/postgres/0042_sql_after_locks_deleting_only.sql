-- `taskhost_add`'s `after` (0041) locked every task it named until the caller's transaction
-- ended, whatever the task's queue: a caller holding its transaction open held back that task's
-- success, and with it the whole batch of successes its worker was writing. Only a task a success
-- may delete needs the lock (so that its success waits and keeps it for the dependent's run to
-- read): the trigger now locks and marks only those of a queue that deletes its successes
-- (`task_run_limits.on_success = 'delete'`, as read then: a queue switched to deleting after the
-- add may delete one, as it may a task a wait began on in the same instant). One named and no
-- longer there is refused, as before. The others are met by the intake, as before 0041.
CREATE OR REPLACE FUNCTION taskhost_keep_after() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
AS $fn$
DECLARE
    missing bigint;
BEGIN
    -- In id order, as the host's add and the worker's batches lock tasks (no deadlock); a lock
    -- waits for a success deleting the task, and then finds no row.
    PERFORM 1 FROM task_queue t
    WHERE t.id IN (SELECT a.after_id FROM added a WHERE a.met < 0)
        AND 'queue:' || t.queue IN (SELECT l.name FROM task_run_limits l WHERE l.on_success = 'delete')
    ORDER BY t.id FOR UPDATE OF t;
    -- (After the locks: those it holds are there until the add ends.)
    SELECT min(a.after_id) INTO missing FROM added a
    WHERE a.met < 0 AND NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a.after_id);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid after: task %s is no longer there (its success deleted it)', missing);
    END IF;
    UPDATE task_queue SET keep_row = 1
    WHERE id IN (SELECT a.after_id FROM added a WHERE a.met < 0) AND keep_row IS NULL AND finished_on IS NULL
        AND 'queue:' || queue IN (SELECT l.name FROM task_run_limits l WHERE l.on_success = 'delete');
    RETURN NULL;
END
$fn$;
-- (Replacing a function drops its settings: its search path is set again, as 0041 set it.)
DO $do$
BEGIN
    EXECUTE format('ALTER FUNCTION taskhost_keep_after() SET search_path = %I, pg_temp', current_schema());
END
$do$;
