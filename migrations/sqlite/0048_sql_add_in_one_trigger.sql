-- SQL enqueue (issue 50, session 85): `taskhost_add` in fewer steps and one trigger (BENCHMARKS.md,
-- session 85: 463 -> about 400 of SQLite's steps for an add with no options).
-- - The UTF-8 walk is a statement of this trigger, not a second trigger on the view and a view of
--   its own: a trigger's call allocates and clears a frame of registers at every add, and SQLite
--   does not promise the order of two triggers. Its message is still the last of the checks'.
-- - The task's INSERT is one row of VALUES, not INSERT ... SELECT FROM a subquery: SQLite ran the
--   subquery and the SELECT as two coroutines, and `arriving`, computed with AND and OR (which
--   evaluate both sides when they compute a value), called strftime('now') at every add. It is two
--   CASEs now, which stop at their first answer; `taskhost_added` is written from VALUES too.
-- - `after`'s two checks that read task_queue are one pass over its list, before the writes (one
--   row of VALUES never goes through a temporary table, whatever read the table before it).
-- What an add in a long transaction still pays beyond its INSERT is mostly SQLite's statement
-- journal: a statement that may write several rows and may be stopped (a trigger, any function
-- call) copies each page it changes, that the transaction had changed before it, so that an error
-- can undo the statement alone; past 64 KiB in one statement (an add that split several indexes)
-- the journal is a temporary file for the rest of the transaction (about 10 writes an add). A
-- plain INSERT of one row keeps none. That is SQLite's, for any trigger.
-- The two other CHECKs of a list of more than two constants become comparisons, as 0047 did for
-- task_queue: `task_runs.status` (each run written) and `task_runners.status` (each worker's
-- start and end) built their list into a temporary index, with its page cache, at each write.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''scheduled'', ''running'', ''success'', ''error'', ''timeout'', ''cancelled'',
                                         ''snoozed''))',
    'CHECK (status = ''scheduled'' OR status = ''running'' OR status = ''success'' OR status = ''error''
                              OR status = ''timeout'' OR status = ''cancelled'' OR status = ''snoozed'')')
WHERE type = 'table' AND name = 'task_runs';
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''running'', ''success'', ''timeout''))',
    'CHECK (status = ''running'' OR status = ''success'' OR status = ''timeout'')')
WHERE type = 'table' AND name = 'task_runners';
PRAGMA writable_schema = OFF;
CREATE TABLE taskhost_schema_changed (x);
DROP TABLE taskhost_schema_changed;

DROP TRIGGER taskhost_add_utf8;
DROP TRIGGER taskhost_add_text;
DROP VIEW taskhost_add_text;
DROP TRIGGER taskhost_add;

-- Each check is RAISE(ABORT) and comes before the first write (see above): keep it so.
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
    -- Each task it runs after exists (a task its success deleted has its end kept: it succeeded,
    -- and the intake counts it met), and none is dead or cancelled unless run_anyway; a missing
    -- task is named before a dead one, wherever they stand in the list.
    SELECT CASE max(CASE
            WHEN t.id IS NULL AND NOT EXISTS (SELECT 1 FROM task_ends e WHERE e.max_id >= a.value
                AND e.max_id <= a.value - a.value % 4096 + 4095 AND e.min_id <= a.value
                AND instr(',' || e.ids || ',', ',' || a.value || ',') > 0) THEN 2
            WHEN coalesce(NEW.run_anyway, 0) = 0 AND (t.last_status = 'cancelled'
                OR (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL)) THEN 1
            ELSE 0 END)
        WHEN 2 THEN RAISE(ABORT, 'taskhost_add: invalid after: there is no such task')
        WHEN 1 THEN RAISE(ABORT, 'taskhost_add: invalid after: a task it runs after is dead or cancelled, so this task would never run (unless run_anyway)') END
    FROM json_each(NEW."after") a LEFT JOIN task_queue t ON t.id = a.value
    WHERE NEW."after" IS NOT NULL;
    -- Text that is not UTF-8 is refused, naming the argument. SQLite keeps whatever bytes a TEXT
    -- value is given (`CAST(X'FF' AS TEXT)`, a driver handed bytes), and a row holding them could
    -- not be read by the host; no SQLite function checks UTF-8, so the bytes are walked (a
    -- recursive query, about 1 us a byte past ASCII; a run of ASCII is stepped over 8 or 64 bytes
    -- at a time): `need` continuation bytes (80 to BF) still to come, the first of them within `lo`
    -- to `hi` (narrower after E0, ED, F0 and F4: no overlong form, surrogate or code point past
    -- 10FFFF); C0, C1 and F5 to FF never start a character. Only text with a byte outside
    -- printable ASCII is walked (the WHERE; a NUL was refused above); none longer than its
    -- argument may be, so the walk's cost is bounded.
    SELECT CASE (WITH RECURSIVE
            arg(pos, value) AS (VALUES (1, NEW.data), (2, NEW.queue), (3, NEW.unique_key), (4, NEW."key"),
                (5, NEW.queued_by)),
            walk(pos, b, i, need, lo, hi, bad) AS (
                SELECT pos, CAST(value AS BLOB), 1, 0, X'80', X'BF', 0 FROM arg
                WHERE typeof(value) = 'text' AND value GLOB '*[^' || char(1) || '-' || char(127) || ']*'
                  AND length(CAST(value AS BLOB)) <= CASE WHEN pos = 1
                      THEN max(1024, coalesce(CAST((SELECT v FROM task_counters WHERE name = 'max_data_bytes') AS INTEGER), 1048576))
                      ELSE 255 END
                UNION ALL
                -- (A run of ASCII, 8 or 64 bytes, at once where no character is under way.)
                SELECT pos, b, i + CASE WHEN need > 0 OR substr(b, i, 1) >= X'80'
                                          OR CAST(substr(b, i, 8) AS TEXT) GLOB '*[^' || char(1) || '-' || char(127) || ']*'
                                        THEN 1
                                        WHEN CAST(substr(b, i, 64) AS TEXT) GLOB '*[^' || char(1) || '-' || char(127) || ']*'
                                        THEN 8 ELSE 64 END,
                    CASE WHEN need > 0 THEN need - 1
                         WHEN substr(b, i, 1) < X'80' THEN 0
                         WHEN substr(b, i, 1) BETWEEN X'C2' AND X'DF' THEN 1
                         WHEN substr(b, i, 1) BETWEEN X'E0' AND X'EF' THEN 2
                         ELSE 3 END,
                    CASE WHEN need > 0 THEN X'80'
                         WHEN substr(b, i, 1) = X'E0' THEN X'A0'
                         WHEN substr(b, i, 1) = X'F0' THEN X'90'
                         ELSE X'80' END,
                    CASE WHEN need > 0 THEN X'BF'
                         WHEN substr(b, i, 1) = X'ED' THEN X'9F'
                         WHEN substr(b, i, 1) = X'F4' THEN X'8F'
                         ELSE X'BF' END,
                    CASE WHEN need > 0 THEN substr(b, i, 1) NOT BETWEEN lo AND hi
                         ELSE substr(b, i, 1) >= X'80' AND substr(b, i, 1) NOT BETWEEN X'C2' AND X'F4' END
                FROM walk WHERE i <= length(b) AND bad = 0)
        SELECT min(pos) FROM walk WHERE bad OR (i > length(b) AND need > 0))
        WHEN 1 THEN RAISE(ABORT, 'taskhost_add: invalid data: not UTF-8 text')
        WHEN 2 THEN RAISE(ABORT, 'taskhost_add: invalid queue: not UTF-8 text')
        WHEN 3 THEN RAISE(ABORT, 'taskhost_add: invalid unique_key: not UTF-8 text')
        WHEN 4 THEN RAISE(ABORT, 'taskhost_add: invalid key: not UTF-8 text')
        WHEN 5 THEN RAISE(ABORT, 'taskhost_add: invalid queued_by: not UTF-8 text') END
    WHERE NEW.data GLOB '*[^ -~]*' OR NEW.queue GLOB '*[^ -~]*' OR NEW.unique_key GLOB '*[^ -~]*'
       OR NEW."key" GLOB '*[^ -~]*' OR NEW.queued_by GLOB '*[^ -~]*';
    -- The writes.
    -- A key held past its period is let go, as an add through the API does.
    UPDATE task_queue SET active_unique_key = NULL
    WHERE NEW.unique_key IS NOT NULL AND active_unique_key = NEW.unique_key
      AND unique_until <= strftime('%Y-%m-%d %H:%M:%f', 'now') || '000';
    -- (A task holding the unique key is found below. Whether the task arrives, waiting for the
    -- intake (it runs after tasks, or has a key and is due now), is a CASE, which stops at its first
    -- answer: AND and OR computing a value evaluate both sides.)
    INSERT OR IGNORE INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, max_retries,
        queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway, unique_until,
        unique_states, run_timeout, pinned_digest)
    VALUES (strftime('%Y-%m-%d %H:%M:%f', 'now') || '000', NEW.queued_by,
        CASE WHEN NEW.run_at IS NULL THEN strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'
             ELSE strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) || '000' END,
        NEW.handler, coalesce(NEW.data, '{}'), coalesce(NEW.max_attempts, 5),
        coalesce(NEW.queue, 'default'), coalesce(NEW.priority, 0), NEW.unique_key, NEW.unique_key, NEW."key",
        CASE WHEN NEW."after" IS NOT NULL AND json_array_length(NEW."after") > 0 THEN 'waiting'
             WHEN NEW."key" IS NULL THEN 'scheduled'
             WHEN NEW.run_at IS NULL OR strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) <= strftime('%Y-%m-%d %H:%M:%f', 'now') THEN 'waiting'
             ELSE 'scheduled' END,
        CASE WHEN NEW."after" IS NOT NULL AND json_array_length(NEW."after") > 0 THEN -1
             WHEN NEW."key" IS NULL THEN 0
             WHEN NEW.run_at IS NULL OR strftime('%Y-%m-%d %H:%M:%f', NEW.run_at) <= strftime('%Y-%m-%d %H:%M:%f', 'now') THEN -1
             ELSE 0 END,
        CASE WHEN coalesce(NEW.run_anyway, 0) <> 0 THEN 1 ELSE 0 END,
        CASE WHEN NEW.unique_for IS NOT NULL
             THEN strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || NEW.unique_for || ' seconds') || '000' END,
        -- The default states are written as none, as the host writes them.
        nullif(NEW.unique_states, 'unfinished'), NEW.run_timeout,
        CASE WHEN NEW.version IS NOT NULL THEN (SELECT v.digest FROM task_handler_versions v
            WHERE v.handler = NEW.handler AND substr(v.digest, 1, length(NEW.version)) = NEW.version) END);
    -- The task written, or the one holding its unique key.
    INSERT OR REPLACE INTO taskhost_added (slot, id, created)
    VALUES (0, CASE WHEN changes() > 0 THEN last_insert_rowid()
                    ELSE (SELECT id FROM task_queue WHERE active_unique_key = NEW.unique_key) END,
            changes() > 0);
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
