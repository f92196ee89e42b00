-- SQL enqueue (issue 50): `taskhost_add(handler, data, ...)` queues a task from any language,
-- in the caller's own transaction (a rolled-back transaction leaves no task), checking its
-- arguments as an add through the API does and naming the one that is wrong. It wakes the workers
-- as an add does (the notification is sent when the transaction commits).
--
-- A task with a `key` (due now) or `after` is written `waiting` with `waiting_for` -1, its
-- dependencies as rows of `task_deps` with `met` -1, which nothing but the intake reads: the
-- overseer's intake pass gives it its turn among its key's tasks and its waits as an add through
-- the API would, written once in the host (fair shares and dependencies are not copied here).
CREATE INDEX task_queue_arriving ON task_queue (id) WHERE last_status = 'waiting' AND waiting_for < 0;

CREATE FUNCTION taskhost_add(
    handler      text,
    data         text DEFAULT '{}',
    queue        text DEFAULT 'default',
    priority     integer DEFAULT 0,
    run_at       timestamptz DEFAULT NULL,
    unique_key   text DEFAULT NULL,
    max_attempts integer DEFAULT 5,
    key          text DEFAULT NULL,
    after        bigint[] DEFAULT NULL,
    run_anyway   boolean DEFAULT false,
    queued_by    text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql
-- The tables of the schema it was made in, whatever the caller's search path.
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_variable
DECLARE
    now_     timestamptz := clock_timestamp();
    arriving boolean;
    added    bigint;
    missing  bigint;
    ended    bigint;
BEGIN
    -- NULL is the default, as an option left out.
    data := coalesce(data, '{}');
    queue := coalesce(queue, 'default');
    priority := coalesce(priority, 0);
    max_attempts := coalesce(max_attempts, 5);
    run_anyway := coalesce(run_anyway, false);
    IF handler IS NULL OR handler !~ '^[A-Za-z0-9_-]{1,128}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid handler: %s is not a handler name (1 to 128 letters, digits, - and _)',
            coalesce(quote_literal(left(handler, 130)), 'NULL'));
    END IF;
    IF octet_length(data) > 1048576 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid data: %s bytes, over the limit of 1048576 bytes', octet_length(data));
    END IF;
    BEGIN
        PERFORM data::json;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: data is not valid JSON: ' || SQLERRM;
    END;
    IF queue = '' OR queue = '*' OR octet_length(queue) > 128 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
            'taskhost_add: invalid queue: empty, *, or over 128 bytes (* means every queue to workers)';
    END IF;
    -- Within the calendar the host reads (an infinite time would stop every reader of the task).
    IF NOT isfinite(run_at) OR run_at < '0001-01-01 00:00:00+00' OR run_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid run_at: %s is outside the years 1 to 9999', run_at);
    END IF;
    IF max_attempts < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid max_attempts: %s is under the minimum of 1 (the first run is an attempt)',
            max_attempts);
    END IF;
    IF unique_key = '' OR octet_length(unique_key) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid unique_key: empty or over 255 bytes';
    END IF;
    IF key = '' OR octet_length(key) > 128 OR btrim(key, E' \t\n\r') <> key THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
            'taskhost_add: invalid key: empty, over 128 bytes, or beginning or ending with white space';
    END IF;
    IF octet_length(queued_by) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid queued_by: over 255 bytes';
    END IF;
    IF cardinality(after) > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid after: %s tasks, over the maximum of 10000', cardinality(after));
    END IF;
    IF run_anyway AND coalesce(cardinality(after), 0) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid run_anyway: it runs after no task';
    END IF;
    IF array_position(after, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid after: a NULL task id';
    END IF;
    IF cardinality(after) > 0 THEN
        SELECT a INTO missing FROM unnest(after) AS a
        WHERE NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a) LIMIT 1;
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('taskhost_add: invalid after: there is no task %s', missing);
        END IF;
        IF NOT run_anyway THEN
            SELECT t.id INTO ended FROM task_queue t WHERE t.id = ANY(after)
                AND (t.last_status = 'cancelled' OR (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL))
            LIMIT 1;
            IF ended IS NOT NULL THEN
                RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                    'taskhost_add: invalid after: task %s is dead or cancelled, so this task would never run (unless run_anyway)',
                    ended);
            END IF;
        END IF;
    END IF;
    arriving := (key IS NOT NULL AND (run_at IS NULL OR run_at <= now_)) OR coalesce(cardinality(after), 0) > 0;
    -- A few tries, as an add through the API: the key's holder may end between the refused
    -- insert and the look for it.
    FOR attempt_ IN 1..3 LOOP
        IF unique_key IS NOT NULL THEN
            -- A key held past its period is let go, as an add through the API does.
            UPDATE task_queue SET active_unique_key = NULL
            WHERE active_unique_key = unique_key AND unique_until <= now_;
        END IF;
        INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, max_retries,
            queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway)
        VALUES (now_, queued_by, coalesce(run_at, now_), handler, data, max_attempts, queue, priority, unique_key,
            unique_key, key, CASE WHEN arriving THEN 'waiting' ELSE 'scheduled' END,
            CASE WHEN arriving THEN -1 ELSE 0 END, run_anyway::int)
        ON CONFLICT (active_unique_key) WHERE active_unique_key IS NOT NULL DO NOTHING
        RETURNING id INTO added;
        IF added IS NOT NULL THEN
            IF cardinality(after) > 0 THEN
                INSERT INTO task_deps (task_id, after_id, met) SELECT DISTINCT added, a, -1 FROM unnest(after) AS a;
            END IF;
            PERFORM pg_notify('taskhost_tasks', '');
            RETURN added;
        END IF;
        SELECT t.id INTO added FROM task_queue t WHERE t.active_unique_key = unique_key;
        IF added IS NOT NULL THEN
            RETURN added;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'taskhost_add: the task holding unique key % was not found', unique_key;
END
$fn$;
