-- SQL enqueue (issue 50): the documented INSERT into `taskhost_add` costs on SQLite, in a
-- transaction of many, about 1.7x a plain INSERT of its row where it cost 2.8x (bench/sql-add.sh).
-- Found with EXPLAIN, by what the same triggers cost without each statement:
-- - SQLite writes an INSERT ... SELECT through a temporary table when any statement before it in
--   the program read the table it writes (`readsTable`); the checks of `after` read task_queue,
--   so every add copied its row twice. The checks that read task_queue now come after the write
--   (an error still undoes the whole INSERT), and the write's own unique-key test is its
--   conflict clause (OR IGNORE on the unique index) rather than a read of task_queue.
-- - An INSERT ... SELECT into a table with triggers goes through a temporary table too: the
--   dependency rows' trigger `task_deps_keep_after` (0044) is dropped, and this trigger marks the
--   tasks it runs after `keep_row` itself, as MariaDB's procedure does.
-- - The UTF-8 walk's trigger is entered only for text holding a byte outside printable ASCII.
-- - White space at a name's ends is looked for with instr in a string of it, not IN a list: SQLite
--   builds a list of constants into a temporary index at every call that reaches it; and only in
--   a name that begins or ends with something other than printable ASCII. The string is written
--   in UTF-8 as a blob: U+0009 - U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000 - U+200A, U+2028,
--   U+2029, U+202F, U+205F, U+3000 (char() of the 25 took a register each, in a trigger whose
--   registers are allocated and cleared at every call).
-- (Each temporary table or index costs a page cache's first allocation, about 90 KB; in a
-- connection whose cache had filled, glibc returned it to the system at each free, and an add
-- in a long transaction cost 10 - 16x an INSERT. Set GLIBC_TUNABLES' malloc trim threshold
-- high and it did not: the allocator, not the file.)
DROP TRIGGER task_deps_keep_after;
DROP TRIGGER taskhost_add_utf8;
DROP TRIGGER taskhost_add;

CREATE TRIGGER taskhost_add_utf8 INSTEAD OF INSERT ON taskhost_add
-- Only text with a byte outside printable ASCII can need the walk (a superset of the test below).
WHEN NEW.data GLOB '*[^ -~]*' OR NEW.queue GLOB '*[^ -~]*' OR NEW.unique_key GLOB '*[^ -~]*'
  OR NEW."key" GLOB '*[^ -~]*' OR NEW.queued_by GLOB '*[^ -~]*'
BEGIN
    INSERT INTO taskhost_add_text (arg, value)
    SELECT arg, value FROM (SELECT 'data' AS arg, NEW.data AS value UNION ALL SELECT 'queue', NEW.queue
        UNION ALL SELECT 'unique_key', NEW.unique_key UNION ALL SELECT 'key', NEW."key"
        UNION ALL SELECT 'queued_by', NEW.queued_by)
    WHERE typeof(value) = 'text'
      -- Longer is refused by the other trigger for its length, unwalked: the walk's cost is bounded.
      AND length(CAST(value AS BLOB)) <= CASE WHEN arg = 'data'
          THEN max(1024, coalesce(CAST((SELECT v FROM task_counters WHERE name = 'max_data_bytes') AS INTEGER), 1048576))
          ELSE 255 END
      AND value GLOB '*[^' || char(1) || '-' || char(127) || ']*';
END;

CREATE TRIGGER taskhost_add INSTEAD OF INSERT ON taskhost_add
BEGIN
    SELECT RAISE(ABORT, 'taskhost_add: invalid handler: not a handler name (1 to 128 letters, digits, - and _)')
    WHERE NEW.handler IS NULL OR typeof(NEW.handler) <> 'text' OR NEW.handler = ''
       OR length(CAST(NEW.handler AS BLOB)) > 128 OR NEW.handler GLOB '*[^A-Za-z0-9_-]*'
       OR instr(CAST(NEW.handler AS BLOB), X'00') > 0;
    -- (The limit is never under 1 KiB: read only for more data, as on the other databases.)
    SELECT RAISE(ABORT, 'taskhost_add: invalid data: over the limit of [tasks] max_data_bytes')
    WHERE length(CAST(NEW.data AS BLOB)) > 1024 AND length(CAST(NEW.data AS BLOB))
        > max(1024, coalesce(CAST((SELECT v FROM task_counters WHERE name = 'max_data_bytes') AS INTEGER), 1048576));
    SELECT RAISE(ABORT, 'taskhost_add: data is not valid JSON')
    WHERE NEW.data IS NOT NULL AND (typeof(NEW.data) <> 'text' OR NOT json_valid(NEW.data)
       OR instr(CAST(NEW.data AS BLOB), X'00') > 0);
    SELECT RAISE(ABORT, 'taskhost_add: invalid queue: empty, *, over 128 bytes, or beginning or ending with white space (* means every queue to workers)')
    WHERE NEW.queue IS NOT NULL AND (typeof(NEW.queue) <> 'text' OR NEW.queue IN ('', '*')
       OR length(CAST(NEW.queue AS BLOB)) > 128
       OR (NOT (NEW.queue GLOB '[!-~]*' AND NEW.queue GLOB '*[!-~]')
           AND (instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW.queue, 1, 1)) > 0
             OR instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW.queue, -1, 1)) > 0))
       OR instr(CAST(NEW.queue AS BLOB), X'00') > 0);
    SELECT RAISE(ABORT, 'taskhost_add: invalid priority: not an integer from -2147483648 to 2147483647')
    WHERE NEW.priority IS NOT NULL AND (typeof(NEW.priority) <> 'integer'
       OR NEW.priority NOT BETWEEN -2147483648 AND 2147483647);
    SELECT RAISE(ABORT, 'taskhost_add: invalid max_attempts: not an integer from 1 to 2147483647')
    WHERE NEW.max_attempts IS NOT NULL AND (typeof(NEW.max_attempts) <> 'integer'
       OR NEW.max_attempts NOT BETWEEN 1 AND 2147483647);
    -- (SQLite's time functions take a day past its month's end and an hour 24 and write them as
    -- given; read again through `julianday` they move on. Such a time, and one before the year 1,
    -- is refused, as on PostgreSQL: written, the host could not read its task.)
    SELECT RAISE(ABORT, 'taskhost_add: invalid run_at: not a time (YYYY-MM-DD HH:MM:SS, with a zone or UTC) of a day that exists, in the years 1 to 9999')
    WHERE NEW.run_at IS NOT NULL AND (typeof(NEW.run_at) <> 'text' OR strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) IS NULL
       OR strftime('%Y-%m-%d %H:%M', NEW.run_at) IS NOT strftime('%Y-%m-%d %H:%M', julianday(NEW.run_at))
       OR strftime('%Y', NEW.run_at) < '0001');
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_key: empty, over 255 bytes, or beginning or ending with white space')
    WHERE NEW.unique_key IS NOT NULL AND (typeof(NEW.unique_key) <> 'text' OR NEW.unique_key = ''
       OR length(CAST(NEW.unique_key AS BLOB)) > 255
       OR (NOT (NEW.unique_key GLOB '[!-~]*' AND NEW.unique_key GLOB '*[!-~]')
           AND (instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW.unique_key, 1, 1)) > 0
             OR instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW.unique_key, -1, 1)) > 0))
       OR instr(CAST(NEW.unique_key AS BLOB), X'00') > 0);
    SELECT RAISE(ABORT, 'taskhost_add: invalid key: empty, over 128 bytes, or beginning or ending with white space')
    WHERE NEW."key" IS NOT NULL AND (typeof(NEW."key") <> 'text' OR NEW."key" = ''
       OR length(CAST(NEW."key" AS BLOB)) > 128
       OR (NOT (NEW."key" GLOB '[!-~]*' AND NEW."key" GLOB '*[!-~]')
           AND (instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW."key", 1, 1)) > 0
             OR instr(CAST(X'090A0B0C0D20C285C2A0E19A80E28080E28081E28082E28083E28084E28085E28086E28087E28088E28089E2808AE280A8E280A9E280AFE2819FE38080' AS TEXT), substr(NEW."key", -1, 1)) > 0))
       OR instr(CAST(NEW."key" AS BLOB), X'00') > 0);
    SELECT RAISE(ABORT, 'taskhost_add: invalid queued_by: not text, or over 255 bytes')
    WHERE NEW.queued_by IS NOT NULL AND (typeof(NEW.queued_by) <> 'text' OR length(CAST(NEW.queued_by AS BLOB)) > 255
       OR instr(CAST(NEW.queued_by AS BLOB), X'00') > 0);
    -- As `NewTask::check`: a period of 1 second to 100 years, a timeout of 1 second to a year.
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_for: not a whole number of seconds from 1 to 3155760000 (100 years)')
    WHERE NEW.unique_for IS NOT NULL AND (typeof(NEW.unique_for) <> 'integer'
       OR NEW.unique_for NOT BETWEEN 1 AND 3155760000);
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_states: not "unfinished", "succeeded" or "any"')
    WHERE NEW.unique_states IS NOT NULL AND (typeof(NEW.unique_states) <> 'text'
       OR NEW.unique_states NOT IN ('unfinished', 'succeeded', 'any'));
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_for: a unique period or states need a unique_key')
    WHERE NEW.unique_key IS NULL AND NEW.unique_for IS NOT NULL;
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_states: a unique period or states need a unique_key')
    WHERE NEW.unique_key IS NULL AND NEW.unique_states IN ('succeeded', 'any');
    SELECT RAISE(ABORT, 'taskhost_add: invalid run_timeout: not a whole number of seconds from 1 to 31557600 (a year)')
    WHERE NEW.run_timeout IS NOT NULL AND (typeof(NEW.run_timeout) <> 'integer'
       OR NEW.run_timeout NOT BETWEEN 1 AND 31557600);
    SELECT RAISE(ABORT, 'taskhost_add: invalid version: not a digest: 8 to 64 hex digits (a-f, 0-9)')
    WHERE NEW.version IS NOT NULL AND (typeof(NEW.version) <> 'text' OR length(NEW.version) NOT BETWEEN 8 AND 64
       OR NEW.version GLOB '*[^0-9a-f]*');
    -- (substr, not LIKE: SQLite's LIKE ignores case.)
    SELECT RAISE(ABORT, 'taskhost_add: invalid version: the handler has no such version: see `taskhost versions HANDLER`')
    WHERE NEW.version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM task_handler_versions v
        WHERE v.handler = NEW.handler AND substr(v.digest, 1, length(NEW.version)) = NEW.version);
    SELECT RAISE(ABORT, 'taskhost_add: invalid version: it names several versions of the handler: give more of it')
    WHERE NEW.version IS NOT NULL AND (SELECT count(*) FROM task_handler_versions v
        WHERE v.handler = NEW.handler AND substr(v.digest, 1, length(NEW.version)) = NEW.version) > 1;
    SELECT RAISE(ABORT, 'taskhost_add: invalid run_anyway: not 0 or 1')
    WHERE NEW.run_anyway IS NOT NULL AND (typeof(NEW.run_anyway) <> 'integer' OR NEW.run_anyway NOT IN (0, 1));
    SELECT RAISE(ABORT, 'taskhost_add: invalid after: not a JSON array of at most 10000 task ids')
    WHERE NEW."after" IS NOT NULL AND (typeof(NEW."after") <> 'text' OR NOT json_valid(NEW."after")
       OR json_type(NEW."after") <> 'array' OR json_array_length(NEW."after") > 10000
       OR EXISTS (SELECT 1 FROM json_each(NEW."after") WHERE type <> 'integer'));
    SELECT RAISE(ABORT, 'taskhost_add: invalid run_anyway: it runs after no task')
    WHERE coalesce(NEW.run_anyway, 0) <> 0 AND coalesce(json_array_length(NEW."after"), 0) = 0;
    -- A key held past its period is let go, as an add through the API does.
    UPDATE task_queue SET active_unique_key = NULL
    WHERE NEW.unique_key IS NOT NULL AND active_unique_key = NEW.unique_key
      AND unique_until <= strftime('%Y-%m-%d %H:%M:%f', 'now') || '000';
    -- (OR IGNORE: a task holding the unique key is found below. The statement reads no table it
    -- writes, and none before it read task_queue, so SQLite writes the row without a temporary table.)
    INSERT OR IGNORE INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, max_retries,
        queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway, unique_until,
        unique_states, run_timeout, pinned_digest)
    SELECT strftime('%Y-%m-%d %H:%M:%f', 'now') || '000', NEW.queued_by,
        CASE WHEN NEW.run_at IS NULL THEN strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'
             ELSE strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) || '000' END,
        NEW.handler, coalesce(NEW.data, '{}'), coalesce(NEW.max_attempts, 5),
        coalesce(NEW.queue, 'default'), coalesce(NEW.priority, 0), NEW.unique_key, NEW.unique_key, NEW."key",
        CASE WHEN arriving THEN 'waiting' ELSE 'scheduled' END, CASE WHEN arriving THEN -1 ELSE 0 END,
        CASE WHEN coalesce(NEW.run_anyway, 0) <> 0 THEN 1 ELSE 0 END,
        CASE WHEN NEW.unique_for IS NOT NULL
             THEN strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || NEW.unique_for || ' seconds') || '000' END,
        -- The default states are written as none, as the host writes them.
        nullif(NEW.unique_states, 'unfinished'), NEW.run_timeout,
        CASE WHEN NEW.version IS NOT NULL THEN (SELECT v.digest FROM task_handler_versions v
            WHERE v.handler = NEW.handler AND substr(v.digest, 1, length(NEW.version)) = NEW.version) END
    -- Arriving: it runs after tasks, or has a key and is due now (the intake places it).
    FROM (SELECT (NEW."after" IS NOT NULL AND json_array_length(NEW."after") > 0)
              OR (NEW."key" IS NOT NULL AND (NEW.run_at IS NULL
                  OR strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) <= strftime('%Y-%m-%d %H:%M:%f', 'now'))) AS arriving);
    -- The task written, or the one holding its unique key.
    INSERT OR REPLACE INTO taskhost_added (slot, id, created)
    SELECT 0, CASE WHEN changes() > 0 THEN last_insert_rowid()
                   ELSE (SELECT id FROM task_queue WHERE active_unique_key = NEW.unique_key) END,
           changes() > 0;
    -- The checks that read task_queue come after its write (see above); an error undoes the write.
    -- (A task its success deleted has its end kept: it succeeded, and the intake counts it met.)
    SELECT RAISE(ABORT, 'taskhost_add: invalid after: there is no such task')
    WHERE NEW."after" IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(NEW."after") a
        WHERE NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a.value
            AND t.id IS NOT (SELECT id FROM taskhost_added WHERE created = 1))
        AND NOT EXISTS (SELECT 1 FROM task_ends e WHERE e.max_id >= a.value AND e.max_id <= a.value - a.value % 4096 + 4095
            AND e.min_id <= a.value AND instr(',' || e.ids || ',', ',' || a.value || ',') > 0));
    SELECT RAISE(ABORT, 'taskhost_add: invalid after: a task it runs after is dead or cancelled, so this task would never run (unless run_anyway)')
    WHERE NEW."after" IS NOT NULL AND coalesce(NEW.run_anyway, 0) = 0 AND EXISTS (
        SELECT 1 FROM json_each(NEW."after") a JOIN task_queue t ON t.id = a.value
        WHERE t.last_status = 'cancelled' OR (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL));
    -- (OR IGNORE: an id given twice is one dependency.)
    INSERT OR IGNORE INTO task_deps (task_id, after_id, met)
    SELECT (SELECT id FROM taskhost_added), a.value, -1 FROM json_each(NEW."after") a
    WHERE NEW."after" IS NOT NULL AND (SELECT created FROM taskhost_added) = 1;
    -- The tasks it runs after are kept when they succeed: its run may read their results. (One
    -- task, the usual case, by its id: IN builds a temporary index.)
    UPDATE task_queue SET keep_row = 1
    WHERE NEW."after" IS NOT NULL AND json_array_length(NEW."after") = 1 AND (SELECT created FROM taskhost_added) = 1
      AND id = json_extract(NEW."after", '$[0]') AND keep_row IS NULL AND finished_on IS NULL;
    UPDATE task_queue SET keep_row = 1
    WHERE NEW."after" IS NOT NULL AND json_array_length(NEW."after") > 1 AND (SELECT created FROM taskhost_added) = 1
      AND id IN (SELECT value FROM json_each(NEW."after")) AND keep_row IS NULL AND finished_on IS NULL;
END;
