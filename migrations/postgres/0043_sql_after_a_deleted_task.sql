-- `taskhost_add`'s `after` refused a task its success deleted (a queue with `on_success =
-- 'delete'`) as "there is no task N" (or, deleted between the function's check and its trigger's,
-- "no longer there"), where an add through the API or the CLI finds its end in `task_ends` and
-- counts it met. Both now look for the end too, through `taskhost_ended(id)`, which runs with its
-- owner's rights as `taskhost_data_limit()` does (a role granted the tasks' tables alone may queue
-- `after` such a task; a caller's temporary `task_ends` changes nothing), and the intake, which
-- drops a dependency no longer there, counts it met. A row of `task_ends` holds tasks of one span
-- of 4,096 ids (`transitions::ends::SPAN`): the ends of task N are in a row whose greatest id lies
-- from N to its span's last id and whose least is at most N, read by the key (each operator's
-- operands of one type, so none of a schema on its path is taken for pg_catalog's). Its grants are
-- those of `taskhost_add` (a role that may call that may call this, and PUBLIC only if it may call
-- that: where an operator revoked it, or new functions are not PUBLIC's). `taskhost_add` is
-- made again whole (`CREATE OR REPLACE` keeps the grants made on it), as 0039 left it but for that
-- check, and so is `taskhost_keep_after()`, as 0042 left it.
CREATE OR REPLACE FUNCTION taskhost_ended(task bigint) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
AS $fn$ SELECT EXISTS (SELECT 1 FROM task_ends e
    WHERE e.max_id >= $1 AND e.max_id <= $1 - $1 % 4096::bigint + 4095::bigint AND e.min_id <= $1
        AND $1::text = ANY (string_to_array(e.ids, ','))) $fn$;
DO $do$
BEGIN
    EXECUTE format('ALTER FUNCTION taskhost_ended(bigint) SET search_path = %I, pg_temp', current_schema());
END
$do$;
DO $grants$
DECLARE
    g record;
BEGIN
    REVOKE ALL ON FUNCTION taskhost_ended(bigint) FROM PUBLIC;
    FOR g IN SELECT DISTINCT a.grantee FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
             WHERE p.proname = 'taskhost_add' AND p.pronamespace = current_schema()::regnamespace
                 AND a.privilege_type = 'EXECUTE' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION taskhost_ended(bigint) TO %s',
            CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
    END LOOP;
END
$grants$;

CREATE OR REPLACE FUNCTION taskhost_add(
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
    queued_by    text DEFAULT NULL,
    unique_for   interval DEFAULT NULL,
    unique_states text DEFAULT NULL,
    run_timeout  interval DEFAULT NULL,
    version      text DEFAULT NULL
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
    digests  text[];
    pinned   text;
    limit_   bigint;
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
    -- The operator's limit, as the host last wrote it: never under 1 KiB, so read only for more
    -- data than that (a read costs a call 3 – 6 %).
    IF octet_length(data) > 1024 THEN
        limit_ := taskhost_data_limit();
        IF octet_length(data) > limit_ THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                'taskhost_add: invalid data: %s bytes, over the limit of %s bytes ([tasks] max_data_bytes)',
                octet_length(data), limit_);
        END IF;
    END IF;
    BEGIN
        PERFORM data::json;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: data is not valid JSON: ' || SQLERRM;
    END;
    IF queue = '' OR queue = '*' OR octet_length(queue) > 128
            OR ascii(left(queue, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288)
            OR ascii(right(queue, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
            'taskhost_add: invalid queue: empty, *, over 128 bytes, or beginning or ending with white space (* means every queue to workers)';
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
    IF unique_key = '' OR octet_length(unique_key) > 255
            OR ascii(left(unique_key, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288)
            OR ascii(right(unique_key, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE =
            'taskhost_add: invalid unique_key: empty, over 255 bytes, or beginning or ending with white space';
    END IF;
    -- (White space as Unicode has it, as the host and MariaDB judge it: by code point, so
    -- that neither the database's encoding nor its locale changes what is refused.)
    IF key = '' OR octet_length(key) > 128
            OR ascii(left(key, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288)
            OR ascii(right(key, 1)) IN (9, 10, 11, 12, 13, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197, 8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288) THEN
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
    -- As `NewTask::check`: a period of 1 second to 100 years, a timeout of 1 second to a year.
    IF extract(epoch FROM unique_for) NOT BETWEEN 1 AND 3155760000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid unique_for: %s is out of range (1 second to 100 years)', unique_for);
    END IF;
    IF unique_states NOT IN ('unfinished', 'succeeded', 'any') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid unique_states: %s is not unfinished, succeeded or any', quote_literal(left(unique_states, 30)));
    END IF;
    IF unique_key IS NULL AND (unique_for IS NOT NULL OR unique_states <> 'unfinished') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid %s: a unique period or states need a unique_key',
            CASE WHEN unique_for IS NOT NULL THEN 'unique_for' ELSE 'unique_states' END);
    END IF;
    IF extract(epoch FROM run_timeout) NOT BETWEEN 1 AND 31557600 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid run_timeout: %s is out of range (1 second to 1 year)', run_timeout);
    END IF;
    IF version !~ '^[0-9a-f]{8,64}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'taskhost_add: invalid version: %s is not a digest: 8 to 64 hex digits (a-f, 0-9)',
            quote_literal(left(version, 70)));
    END IF;
    IF version IS NOT NULL THEN
        -- (Hex digits only: the start holds no pattern character.)
        digests := ARRAY(SELECT v.digest FROM task_handler_versions v
                         WHERE v.handler = handler AND v.digest LIKE version || '%' LIMIT 2);
        IF cardinality(digests) = 0 THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                'taskhost_add: invalid version: handler %s has no version %s: see `taskhost versions %s`',
                handler, version, handler);
        ELSIF cardinality(digests) > 1 THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                'taskhost_add: invalid version: %s names several versions of handler %s: give more of it',
                version, handler);
        END IF;
        pinned := digests[1];
    END IF;
    IF run_anyway AND coalesce(cardinality(after), 0) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid run_anyway: it runs after no task';
    END IF;
    IF array_position(after, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'taskhost_add: invalid after: a NULL task id';
    END IF;
    IF cardinality(after) > 0 THEN
        -- (A task its success deleted has its end kept: it succeeded, and the intake counts it met.)
        SELECT a INTO missing FROM unnest(after) AS a
        WHERE NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a) AND NOT taskhost_ended(a) LIMIT 1;
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
            queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway,
            unique_until, unique_states, run_timeout, pinned_digest)
        VALUES (now_, queued_by, coalesce(run_at, now_), handler, data, max_attempts, queue, priority, unique_key,
            unique_key, key, CASE WHEN arriving THEN 'waiting' ELSE 'scheduled' END,
            -- The period as the seconds checked (a month 30 days, a year 365.25), not calendar
            -- months and days in the session's time zone.
            CASE WHEN arriving THEN -1 ELSE 0 END, run_anyway::int,
            now_ + make_interval(secs => extract(epoch FROM unique_for)::float8),
            -- The default is written as none, as the host writes it.
            nullif(unique_states, 'unfinished'), floor(extract(epoch FROM run_timeout))::bigint, pinned)
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
    WHERE a.met < 0 AND NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a.after_id)
        AND NOT taskhost_ended(a.after_id);
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
-- (Replacing a function drops its settings: its search path is set again, as 0042 set it.)
DO $do$
BEGIN
    EXECUTE format('ALTER FUNCTION taskhost_keep_after() SET search_path = %I, pg_temp', current_schema());
END
$do$;
