-- SQL enqueue (issue 50) on MariaDB: the short paths answer with the task's id from their INSERT
-- (`RETURNING id`, MariaDB's) rather than from a SELECT after it: a statement sending its row from
-- within the procedure after a write costs a call 7 – 10 µs more (BENCHMARKS.md, session 95). The
-- id comes back as before: one row, one BIGINT column `id`. A task that runs after another still
-- answers by SELECT, once its dependency is written. A time to run at is read by a CAST of fewer
-- items, a zone's offset only when it has one (about 5 µs less). What `taskhost_add` takes and
-- refuses is as before. Made again whole (`CREATE OR REPLACE` keeps the grants made on it), as 0050
-- left it but for those. (mysql-only/0051 tests a time without a REGEXP on MySQL, which compiles
-- the pattern at every call, 17 µs; here that test's items cost more than the REGEXP, 14 µs
-- against 11.)
CREATE OR REPLACE PROCEDURE taskhost_add(
    IN p_handler LONGTEXT CHARACTER SET utf8mb4,
    IN p_data    LONGTEXT CHARACTER SET utf8mb4,
    IN p_options LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
main: BEGIN
    -- The operator's limit, as the host last wrote it, which is never under 1 KiB: read only for
    -- more data than that, as a read costs a call 40 – 100 µs, a third of it (none: NULL, and the
    -- call is handed on to the whole procedure, which holds the default). A consistent read, not
    -- `SET … = (SELECT …)`: that one locks the row until the caller's transaction ends.
    DECLARE v_limit BIGINT DEFAULT 1024;
    IF OCTET_LENGTH(p_data) > 1024 THEN
        SELECT MAX(v) INTO v_limit FROM task_counters WHERE name = 'max_data_bytes';
    END IF;
    IF p_options IS NULL THEN
        IF p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data) = 0 THEN
            INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue,
                priority, last_status, waiting_for, run_anyway)
            VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), p_handler, p_data, 5, 'default', 0, 'scheduled', 0, 0)
            -- (The id from the INSERT itself, a signed BIGINT as the whole procedure's: see above.)
            RETURNING id;
        ELSE
            CALL taskhost_add_checked(p_handler, p_data, p_options);
        END IF;
        LEAVE main;
    ELSEIF JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT'
            AND JSON_LENGTH(JSON_REMOVE(p_options, '$.queue', '$.priority')) = 0 THEN
        -- Only `queue` and `priority` (or no option), what most calls give: each value read once
        -- and tested from its JSON text, in as few items as can be: the server prepares every
        -- item of a statement it runs at each call, whether its value is needed or not, and the
        -- general test below costs a call about 100 µs so. With no option written with an escape
        -- (no `\` in the options), a string's text between its quotes is its value. Any call
        -- this does not take goes to the whole procedure, which takes it or names what is wrong.
        BEGIN
            DECLARE v_queue, v_priority LONGTEXT CHARACTER SET utf8mb4;
            SET v_queue = JSON_EXTRACT(p_options, '$.queue'), v_priority = JSON_EXTRACT(p_options, '$.priority');
            IF LOCATE('\\', p_options) = 0 AND LOCATE(CHAR(0), p_options COLLATE utf8mb4_bin) = 0
                    AND p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                    AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data) = 0
                    -- A queue of 1 to 128 bytes beginning and ending in printable ASCII, not `*`
                    -- (one beginning or ending past ASCII: the whole procedure judges white space).
                    AND (v_queue IS NULL OR (LEFT(v_queue, 1) = '"' AND OCTET_LENGTH(v_queue) BETWEEN 3 AND 130
                        AND ORD(SUBSTRING(v_queue, 2, 1)) BETWEEN 33 AND 126 AND ORD(SUBSTRING(v_queue, -2, 1)) BETWEEN 33 AND 126
                        AND BINARY v_queue <> '"*"'))
                    -- An integer written plainly (no exponent) of at most 11 characters, in range.
                    AND (v_priority IS NULL OR (JSON_TYPE(v_priority) = 'INTEGER' AND LOCATE('e', LOWER(v_priority)) = 0
                        AND OCTET_LENGTH(v_priority) <= 11 AND CAST(v_priority AS SIGNED) BETWEEN -2147483648 AND 2147483647)) THEN
                INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue,
                    priority, last_status, waiting_for, run_anyway)
                VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), p_handler, p_data, 5, COALESCE(JSON_UNQUOTE(v_queue), 'default'),
                    COALESCE(CAST(v_priority AS SIGNED), 0), 'scheduled', 0, 0)
                RETURNING id;
            ELSE
                CALL taskhost_add_checked(p_handler, p_data, p_options);
            END IF;
        END;
        LEAVE main;
    END IF;
    -- A time to run at, one task to run after, a key or a number of attempts, with at most a queue
    -- and a priority (0050): each value read once and tested from its JSON text, as on the path
    -- above, and only if given (the server prepares a test's items only when it reaches the test),
    -- the time by one pattern and CAST, the task by one consistent read of its row, where the
    -- general test below prepared its hundred items at each call and the whole procedure read a
    -- task to run after four times over. Only options naming one of them come here (a test of the
    -- text, which costs the other calls next to nothing); a call this does not take goes on to the
    -- general test, as before.
    IF LOCATE('"run_at"', p_options) > 0 OR LOCATE('"after"', p_options) > 0 OR LOCATE('"key"', p_options) > 0
            OR LOCATE('"max_attempts"', p_options) > 0 THEN
        BEGIN
            DECLARE v_queue, v_priority, v_time, v_after, v_key, v_attempts LONGTEXT CHARACTER SET utf8mb4;
            DECLARE v_when DATETIME(6);
            DECLARE v_task BIGINT;
            DECLARE v_n INT DEFAULT 0;
            DECLARE v_ok BOOLEAN DEFAULT FALSE;
            IF JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT'
                    AND JSON_LENGTH(JSON_REMOVE(p_options, '$.queue', '$.priority', '$.run_at', '$.after', '$.key', '$.max_attempts')) = 0 THEN
                SET v_queue = JSON_EXTRACT(p_options, '$.queue'), v_priority = JSON_EXTRACT(p_options, '$.priority'),
                    v_time = JSON_EXTRACT(p_options, '$.run_at'), v_after = JSON_EXTRACT(p_options, '$.after'),
                    v_key = JSON_EXTRACT(p_options, '$.key'), v_attempts = JSON_EXTRACT(p_options, '$.max_attempts'),
                    v_ok = LOCATE('\\', p_options) = 0 AND LOCATE(CHAR(0), p_options COLLATE utf8mb4_bin) = 0
                        AND p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                        AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data) = 0;
            END IF;
            -- A queue of 1 to 128 bytes beginning and ending in printable ASCII, not `*`; a key
            -- so, `*` too; a priority, and attempts from 1, as integers written plainly, in range.
            IF v_ok AND v_queue IS NOT NULL THEN
                SET v_ok = LEFT(v_queue, 1) = '"' AND OCTET_LENGTH(v_queue) BETWEEN 3 AND 130
                    AND ORD(SUBSTRING(v_queue, 2, 1)) BETWEEN 33 AND 126 AND ORD(SUBSTRING(v_queue, -2, 1)) BETWEEN 33 AND 126
                    AND BINARY v_queue <> '"*"';
            END IF;
            IF v_ok AND v_priority IS NOT NULL THEN
                SET v_ok = JSON_TYPE(v_priority) = 'INTEGER' AND LOCATE('e', LOWER(v_priority)) = 0
                    AND OCTET_LENGTH(v_priority) <= 11 AND CAST(v_priority AS SIGNED) BETWEEN -2147483648 AND 2147483647;
            END IF;
            IF v_ok AND v_key IS NOT NULL THEN
                SET v_ok = LEFT(v_key, 1) = '"' AND OCTET_LENGTH(v_key) BETWEEN 3 AND 130
                    AND ORD(SUBSTRING(v_key, 2, 1)) BETWEEN 33 AND 126 AND ORD(SUBSTRING(v_key, -2, 1)) BETWEEN 33 AND 126;
            END IF;
            IF v_ok AND v_attempts IS NOT NULL THEN
                SET v_ok = JSON_TYPE(v_attempts) = 'INTEGER' AND LOCATE('e', LOWER(v_attempts)) = 0
                    AND OCTET_LENGTH(v_attempts) <= 10 AND CAST(v_attempts AS SIGNED) BETWEEN 1 AND 2147483647;
            END IF;
            IF v_ok AND v_time IS NOT NULL THEN
                -- A JSON string of a time the general test's pattern takes, its zone `Z` or an
                -- offset, its year 1001 to 9998 (no offset takes it past what a DATETIME holds):
                -- read by CAST, less the offset.
                IF v_time COLLATE utf8mb4_bin REGEXP
                        '^"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?(Z|[+-](0[0-9]|1[0-5]):[0-5][0-9])?"\\z'
                        AND LEFT(v_time, 5) BETWEEN '"1001' AND '"9998' THEN
                    BEGIN
                        -- (A day no calendar has: an error in strict mode; NULL here, and the
                        -- general test names it.)
                        DECLARE CONTINUE HANDLER FOR 1292, 1411, 1441 SET v_when = NULL;
                        -- (MariaDB reads a T between the day and the time; each case apart, as the
                        -- server prepares only the items of the one it takes.)
                        IF SUBSTRING(v_time, -7, 1) IN ('+', '-') THEN
                            SET v_when = CAST(SUBSTRING(v_time, 2, CHAR_LENGTH(v_time) - 8) AS DATETIME(6))
                                - INTERVAL CAST(SUBSTRING(v_time, -7, 3) AS SIGNED) * 60
                                    + CAST(CONCAT(SUBSTRING(v_time, -7, 1), SUBSTRING(v_time, -3, 2)) AS SIGNED) MINUTE;
                        ELSE
                            SET v_when = CAST(SUBSTRING(v_time, 2, CHAR_LENGTH(v_time) - 2 - (RIGHT(v_time, 2) = 'Z"')) AS DATETIME(6));
                        END IF;
                    END;
                END IF;
                SET v_ok = v_when IS NOT NULL;
            END IF;
            -- One task, written plainly, within the caller's transaction (outside one, the whole
            -- procedure makes one for the task and its dependency), that is there, not dead or
            -- cancelled, of a queue that keeps its successes (one that deletes them is locked by
            -- the whole procedure), read as the whole procedure reads it (`SELECT … INTO`: a
            -- consistent read, which locks nothing but under SERIALIZABLE).
            IF v_ok AND v_after IS NOT NULL THEN
                IF v_after COLLATE utf8mb4_bin REGEXP '^\\[[0-9]{1,18}\\]\\z' AND @@in_transaction = 1 THEN
                    SET v_task = CAST(SUBSTRING(v_after, 2, CHAR_LENGTH(v_after) - 2) AS SIGNED);
                    SELECT COUNT(*) INTO v_n FROM task_queue t
                        LEFT JOIN task_run_limits l ON l.name = CONCAT('queue:', t.queue) AND l.on_success = 'delete'
                    WHERE t.id = v_task AND l.name IS NULL AND t.last_status <> 'cancelled'
                        AND NOT (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL);
                END IF;
                SET v_ok = v_n = 1;
            END IF;
            IF v_ok THEN
                -- (A task that runs after another, or a keyed one due already, waits for the
                -- intake, as the whole procedure writes it. One that runs after none answers with
                -- its id from the INSERT, as above; one that does, once its dependency is written.)
                IF v_after IS NULL THEN
                    INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue,
                        priority, share_key, last_status, waiting_for, run_anyway)
                    VALUES (UTC_TIMESTAMP(6), COALESCE(v_when, UTC_TIMESTAMP(6)), p_handler, p_data,
                        COALESCE(CAST(v_attempts AS SIGNED), 5), COALESCE(JSON_UNQUOTE(v_queue), 'default'),
                        COALESCE(CAST(v_priority AS SIGNED), 0), JSON_UNQUOTE(v_key),
                        IF(v_key IS NULL OR COALESCE(v_when, UTC_TIMESTAMP(6)) > UTC_TIMESTAMP(6), 'scheduled', 'waiting'),
                        IF(v_key IS NULL OR COALESCE(v_when, UTC_TIMESTAMP(6)) > UTC_TIMESTAMP(6), 0, -1), 0)
                    RETURNING id;
                ELSE
                    INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue,
                        priority, share_key, last_status, waiting_for, run_anyway)
                    VALUES (UTC_TIMESTAMP(6), COALESCE(v_when, UTC_TIMESTAMP(6)), p_handler, p_data,
                        COALESCE(CAST(v_attempts AS SIGNED), 5), COALESCE(JSON_UNQUOTE(v_queue), 'default'),
                        COALESCE(CAST(v_priority AS SIGNED), 0), JSON_UNQUOTE(v_key), 'waiting', -1, 0);
                    INSERT INTO task_deps (task_id, after_id, met) VALUES (LAST_INSERT_ID(), v_task, -1);
                    SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id;
                END IF;
                LEAVE main;
            END IF;
        END;
    END IF;
    -- Other options: plain ones, and `run_at`, `unique_for`, `unique_states`, each plainly written.
    BEGIN
        DECLARE v_at LONGTEXT CHARACTER SET utf8mb4;
        DECLARE v_due DATETIME(6);
        DECLARE v_ok BOOLEAN DEFAULT TRUE;
        -- Only a call with these prepares their tests. (NULL for options that are not JSON:
        -- the next test refuses them.)
        IF JSON_CONTAINS_PATH(p_options, 'one', '$.run_at', '$.unique_for', '$.unique_states') THEN
            SET v_at = JSON_VALUE(p_options, '$.run_at');
            -- As the whole procedure reads a time its pattern (below) takes: the zone's offset
            -- by hand (CONVERT_TZ leaves times past 2038 as they are).
            BEGIN
                -- (In strict mode a text that is no time, a day no calendar has or a time out of
                -- range is an error naming no option: here it is NULL, and the call handed on.)
                DECLARE CONTINUE HANDLER FOR 1292, 1411, 1441 SET v_due = NULL;
                -- (`= 'Z'` ignores case, as the whole procedure's LIKE.)
                SET v_due = STR_TO_DATE(
                        REPLACE(IF(SUBSTRING(v_at, -6, 1) IN ('+', '-'), LEFT(v_at, CHAR_LENGTH(v_at) - 6),
                            IF(RIGHT(v_at, 1) = 'Z', LEFT(v_at, CHAR_LENGTH(v_at) - 1), v_at)), 'T', ' '),
                        IF(v_at LIKE '%.%', '%Y-%m-%d %H:%i:%s.%f', '%Y-%m-%d %H:%i:%s'))
                    - INTERVAL IF(SUBSTRING(v_at, -6, 1) IN ('+', '-'),
                        CAST(SUBSTRING(v_at, -6, 3) AS SIGNED) * 60 + CAST(CONCAT(SUBSTRING(v_at, -6, 1), RIGHT(v_at, 2)) AS SIGNED), 0) MINUTE;
            END;
            -- (JSON_VALUE reads an array or object as NULL: the option is tested, not the value.)
            SET v_ok = (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.run_at')
                OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.run_at')) = 'STRING' AND v_at COLLATE utf8mb4_bin REGEXP
                '^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?([Zz]|[+-](0[0-9]|1[0-5]):[0-5][0-9])?\\z'
                AND v_due IS NOT NULL))
            AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_for')
                OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_for')) = 'INTEGER'
                    AND LOCATE('e', LOWER(JSON_VALUE(p_options, '$.unique_for'))) = 0
                    AND CAST(JSON_VALUE(p_options, '$.unique_for') AS DECIMAL(30)) BETWEEN 1 AND 3155760000))
            AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_states')
                OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_states')) = 'STRING'
                    AND BINARY JSON_VALUE(p_options, '$.unique_states') IN ('unfinished', 'succeeded', 'any')))
            -- (A unique period, or states other than the default, without a unique key: the
            -- whole procedure refuses them; it takes the default, which is left to it.)
            AND (JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                OR NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_for', '$.unique_states'));
        END IF;
        IF v_ok AND p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data) = 0 AND LOCATE('\\', p_options) = 0
                AND JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT' AND (
                JSON_LENGTH(JSON_REMOVE(p_options, '$.queue', '$.priority', '$.max_attempts', '$.run_timeout', '$.queued_by', '$.key', '$.unique_key', '$.run_at', '$.unique_for', '$.unique_states')) = 0
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.queue')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.queue')) <= 128
                        AND ORD(LEFT(JSON_VALUE(p_options, '$.queue'), 1)) BETWEEN 33 AND 126
                        AND ORD(RIGHT(JSON_VALUE(p_options, '$.queue'), 1)) BETWEEN 33 AND 126
                        AND JSON_VALUE(p_options, '$.queue') NOT IN ('', '*') AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.queue')) = 0))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.priority')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.priority')) = 'INTEGER'
                        AND LOCATE('e', LOWER(JSON_VALUE(p_options, '$.priority'))) = 0
                        AND CAST(JSON_VALUE(p_options, '$.priority') AS DECIMAL(30)) BETWEEN -2147483648 AND 2147483647))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.max_attempts')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.max_attempts')) = 'INTEGER'
                        AND LOCATE('e', LOWER(JSON_VALUE(p_options, '$.max_attempts'))) = 0
                        AND CAST(JSON_VALUE(p_options, '$.max_attempts') AS DECIMAL(30)) BETWEEN 1 AND 2147483647))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.run_timeout')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.run_timeout')) = 'INTEGER'
                        AND LOCATE('e', LOWER(JSON_VALUE(p_options, '$.run_timeout'))) = 0
                        AND CAST(JSON_VALUE(p_options, '$.run_timeout') AS DECIMAL(30)) BETWEEN 1 AND 31557600))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.queued_by')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.queued_by')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.queued_by')) <= 255
                        AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.queued_by')) = 0))
                -- (A queue, key or unique key beginning or ending past ASCII goes to the whole
                -- procedure, whose pattern judges white space.)
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.key')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.key')) BETWEEN 1 AND 128
                        AND ORD(LEFT(JSON_VALUE(p_options, '$.key'), 1)) BETWEEN 33 AND 126
                        AND ORD(RIGHT(JSON_VALUE(p_options, '$.key'), 1)) BETWEEN 33 AND 126
                        AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.key')) = 0))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.unique_key')) <= 255 AND JSON_VALUE(p_options, '$.unique_key') <> ''
                        AND ORD(LEFT(JSON_VALUE(p_options, '$.unique_key'), 1)) BETWEEN 33 AND 126
                        AND ORD(RIGHT(JSON_VALUE(p_options, '$.unique_key'), 1)) BETWEEN 33 AND 126
                        AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.unique_key')) = 0))) THEN
            -- A keyed task due now waits for the intake, as the whole procedure writes it.
            -- Twice when a key held past its period was let go (the update sets it NULL: two rows
            -- affected, whatever the client's CLIENT_FOUND_ROWS).
            REPEAT
                INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                    max_retries, queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for,
                    run_anyway, unique_until, unique_states, run_timeout)
                VALUES (UTC_TIMESTAMP(6), JSON_VALUE(p_options, '$.queued_by'), COALESCE(v_due, UTC_TIMESTAMP(6)),
                    p_handler, p_data, COALESCE(CAST(JSON_VALUE(p_options, '$.max_attempts') AS SIGNED), 5),
                    COALESCE(JSON_VALUE(p_options, '$.queue'), 'default'),
                    COALESCE(CAST(JSON_VALUE(p_options, '$.priority') AS SIGNED), 0),
                    JSON_VALUE(p_options, '$.unique_key'), JSON_VALUE(p_options, '$.unique_key'),
                    JSON_VALUE(p_options, '$.key'),
                    IF(JSON_CONTAINS_PATH(p_options, 'one', '$.key') AND COALESCE(v_due, UTC_TIMESTAMP(6)) <= UTC_TIMESTAMP(6),
                        'waiting', 'scheduled'),
                    IF(JSON_CONTAINS_PATH(p_options, 'one', '$.key') AND COALESCE(v_due, UTC_TIMESTAMP(6)) <= UTC_TIMESTAMP(6),
                        -1, 0),
                    0, UTC_TIMESTAMP(6) + INTERVAL CAST(JSON_VALUE(p_options, '$.unique_for') AS SIGNED) SECOND,
                    NULLIF(JSON_VALUE(p_options, '$.unique_states'), 'unfinished'),
                    CAST(JSON_VALUE(p_options, '$.run_timeout') AS SIGNED))
                ON DUPLICATE KEY UPDATE active_unique_key = IF(LAST_INSERT_ID(0) OR unique_until <= UTC_TIMESTAMP(6), NULL, active_unique_key);
            UNTIL LAST_INSERT_ID() <> 0 OR ROW_COUNT() <> 2 END REPEAT;
            IF LAST_INSERT_ID() = 0 THEN
                CALL taskhost_add_checked(p_handler, p_data, p_options);
            ELSE
                SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id;
            END IF;
        -- A time of the pattern the database cannot hold: the whole procedure would fail on it
        -- with an error naming no option, once it reached `run_at` in its order of checks; it
        -- is given a text that is no time instead, which it refuses by name there.
        ELSEIF v_due IS NULL AND v_at REGEXP
                '^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?\\z' THEN
            CALL taskhost_add_checked(p_handler, p_data, JSON_SET(p_options, '$.run_at', 'no calendar time'));
        ELSE
            CALL taskhost_add_checked(p_handler, p_data, p_options);
        END IF;
    END;
END;
