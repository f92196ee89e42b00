-- `taskhost_add` on MySQL, as 0047 made it but for what a review found there (each refused a valid
-- call, or answered one with an error naming nothing):
-- - Options that are not JSON (`'nope'`, `''`) failed MySQL's first JSON function of the short
--   path (3141, "Invalid JSON text"; MariaDB's answers NULL): now they reach the whole procedure,
--   which refuses them as "invalid options: not a JSON object".
-- - A queue, key or unique key of characters MySQL's default collation ignores (U+00AD, U+200B,
--   `*` followed by one) compared equal to '' or '*' and was refused as empty or `*`; the host takes
--   them: compared as bytes now.
-- - `after` of 10,000 ids of 14 digits overflowed ICU's backtrack stack in MariaDB's pattern
--   (3698): MySQL's own writing of the array is checked instead.
-- Both procedures are made again whole (DROP, then CREATE: MySQL has no CREATE OR REPLACE, so a
-- GRANT EXECUTE made on one of them since 0047 must be made again; grants on the database stay).
DROP PROCEDURE IF EXISTS taskhost_add_checked;
CREATE PROCEDURE taskhost_add_checked(
    IN p_handler LONGTEXT CHARACTER SET utf8mb4,
    IN p_data    LONGTEXT CHARACTER SET utf8mb4,
    IN p_options LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
BEGIN
    DECLARE v_now        DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_queue      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT 'default';
    DECLARE v_priority   BIGINT DEFAULT 0;
    DECLARE v_due        DATETIME(6);
    DECLARE v_unique     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_attempts   BIGINT DEFAULT 5;
    DECLARE v_key        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_after      LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_anyway     BIGINT DEFAULT 0;
    DECLARE v_by         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_text       LONGTEXT CHARACTER SET utf8mb4;
    DECLARE v_offset     BIGINT DEFAULT 0;
    DECLARE v_bad        VARCHAR(64);
    DECLARE v_n          BIGINT;
    DECLARE v_id         BIGINT;
    DECLARE v_arriving   BOOLEAN DEFAULT FALSE;
    DECLARE v_dup        BOOLEAN DEFAULT FALSE;
    DECLARE v_try        INT DEFAULT 0;
    DECLARE v_msg        VARCHAR(512);
    DECLARE v_own_tx     BOOLEAN DEFAULT FALSE;
    DECLARE v_until      DATETIME(6);
    DECLARE v_for        BIGINT;
    DECLARE v_states     VARCHAR(16);
    DECLARE v_timeout    BIGINT;
    DECLARE v_version    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pinned     VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_limit      BIGINT;
    DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = TRUE;
    -- A call outside a transaction (autocommit) with `after` is one all the same: its task and
    -- its dependencies are written together or not at all.
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        IF v_own_tx THEN
            ROLLBACK;
        END IF;
        RESIGNAL;
    END;

    -- (`\z`: `$` would let a final newline through.)
    IF p_handler IS NULL OR p_handler COLLATE utf8mb4_bin NOT REGEXP '^[A-Za-z0-9_-]{1,128}\\z' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
            'taskhost_add: invalid handler: not a handler name (1 to 128 letters, digits, - and _)';
    END IF;
    SET p_data = COALESCE(p_data, '{}');
    -- The operator's limit, as the host last wrote it.
    SELECT COALESCE(MAX(v), 1048576) INTO v_limit FROM task_counters WHERE name = 'max_data_bytes';
    IF OCTET_LENGTH(p_data) > v_limit THEN
        SET v_msg = LEFT(CONCAT('taskhost_add: invalid data: ', OCTET_LENGTH(p_data), ' bytes, over the limit of ', v_limit,
            ' bytes ([tasks] max_data_bytes)'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    BEGIN
        -- (MySQL's JSON functions fail on a document nested over 100 deep, naming nothing.)
        DECLARE EXIT HANDLER FOR 3157 SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
            'taskhost_add: data is not valid JSON here: nested over 100 deep, MySQL''s limit';
        IF NOT JSON_VALID(p_data) OR LOCATE(CHAR(0), p_data COLLATE utf8mb4_bin) > 0 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: data is not valid JSON';
        END IF;
    END;
    IF p_options IS NOT NULL THEN
        BEGIN
            DECLARE EXIT HANDLER FOR 3157 SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                'taskhost_add: invalid options: nested over 100 deep, MySQL''s limit';
            IF NOT JSON_VALID(p_options) OR JSON_TYPE(p_options) <> 'OBJECT' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid options: not a JSON object';
            END IF;
        END;
        -- (MySQL reads a name's JSON escapes, as PostgreSQL does: `"\\u0071ueue"` is `queue`, unlike
        -- on MariaDB, whose JSON functions keep them as written and so refuse such names. A name
        -- is cut for the message: it may be as long as the options.)
        SELECT IF(CHAR_LENGTH(k) > 32, CONCAT(LEFT(k, 29), '...'), k) INTO v_bad
        FROM JSON_TABLE(JSON_KEYS(p_options), '$[*]' COLUMNS (k LONGTEXT PATH '$')) AS j
        -- (As bytes: utf8mb4_bin pads with spaces, so `"queue "` would pass as `queue`, then be ignored.)
        WHERE CAST(k AS BINARY) NOT IN ('queue', 'priority', 'run_at', 'unique_key', 'max_attempts', 'key', 'after', 'run_anyway',
                        'queued_by', 'unique_for', 'unique_states', 'run_timeout', 'version')
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            SET v_msg = LEFT(CONCAT('taskhost_add: invalid options: unknown option ', QUOTE(v_bad),
                ' (the 13 options: docs/clients.md)'), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        END IF;
        -- A JSON null is the default, as an option left out.
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.queue'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) <> 'STRING' OR v_text COLLATE utf8mb4_bin IN ('', '*')
                    OR OCTET_LENGTH(v_text) > 128 OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z'
                    OR LOCATE(CHAR(0), v_text COLLATE utf8mb4_bin) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid queue: not a string, empty, * (every queue), over 128 bytes, or beginning or ending with white space';
            END IF;
            SET v_queue = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.priority')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.priority')) <> 'INTEGER'
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.priority')) AS DECIMAL(40, 10))
                        <> CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.priority')) AS DECIMAL(30))
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.priority')) AS DECIMAL(30)) NOT BETWEEN -2147483648 AND 2147483647 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid priority: not an integer from -2147483648 to 2147483647';
            END IF;
            -- (Through DECIMAL: MariaDB types 1e3 as an integer, which a cast to SIGNED refuses.)
            SET v_priority = CAST(CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.priority')) AS DECIMAL(30)) AS SIGNED);
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.max_attempts')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.max_attempts')) <> 'INTEGER'
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.max_attempts')) AS DECIMAL(40, 10))
                        <> CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.max_attempts')) AS DECIMAL(30))
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.max_attempts')) AS DECIMAL(30)) NOT BETWEEN 1 AND 2147483647 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid max_attempts: not an integer from 1 to 2147483647 (the first run is an attempt)';
            END IF;
            -- (Through DECIMAL: MariaDB types 1e3 as an integer, which a cast to SIGNED refuses.)
            SET v_attempts = CAST(CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.max_attempts')) AS DECIMAL(30)) AS SIGNED);
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_at')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.run_at'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_at')) <> 'STRING' OR v_text NOT REGEXP
                    '^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?(Z|[+-](0[0-9]|1[0-5]):[0-5][0-9])?\\z' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid run_at: not a time (YYYY-MM-DD HH:MM:SS, with Z, +HH:MM to 15:59 or UTC)';
            END IF;
            -- The zone's offset by hand: CONVERT_TZ leaves times past 2038 as they are.
            IF v_text REGEXP '[+-][0-9]{2}:[0-9]{2}$' THEN
                SET v_offset = IF(LEFT(RIGHT(v_text, 6), 1) = '-', -1, 1)
                    * (CAST(SUBSTRING(RIGHT(v_text, 5), 1, 2) AS SIGNED) * 60 + CAST(RIGHT(v_text, 2) AS SIGNED));
                SET v_text = LEFT(v_text, CHAR_LENGTH(v_text) - 6);
            ELSEIF v_text LIKE '%Z' THEN
                SET v_text = LEFT(v_text, CHAR_LENGTH(v_text) - 1);
            END IF;
            SET v_text = REPLACE(v_text, 'T', ' ');
            SET v_due = IF(v_text LIKE '%.%', STR_TO_DATE(v_text, '%Y-%m-%d %H:%i:%s.%f'),
                           STR_TO_DATE(v_text, '%Y-%m-%d %H:%i:%s')) - INTERVAL v_offset MINUTE;
            IF v_due IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid run_at: not a calendar time';
            END IF;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_key'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) <> 'STRING' OR v_text COLLATE utf8mb4_bin = ''
                    OR OCTET_LENGTH(v_text) > 255 OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z'
                    OR LOCATE(CHAR(0), v_text COLLATE utf8mb4_bin) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid unique_key: not a string, empty, over 255 bytes, or beginning or ending with white space';
            END IF;
            SET v_unique = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.key'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) <> 'STRING' OR v_text COLLATE utf8mb4_bin = '' OR OCTET_LENGTH(v_text) > 128
                    OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z' OR LOCATE(CHAR(0), v_text COLLATE utf8mb4_bin) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid key: not a string, empty, over 128 bytes, or beginning or ending with white space';
            END IF;
            SET v_key = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queued_by')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.queued_by'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queued_by')) <> 'STRING' OR OCTET_LENGTH(v_text) > 255
                    OR LOCATE(CHAR(0), v_text COLLATE utf8mb4_bin) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid queued_by: not a string, or over 255 bytes';
            END IF;
            SET v_by = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_anyway')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_anyway')) <> 'BOOLEAN' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid run_anyway: not true or false';
            END IF;
            SET v_anyway = IF(JSON_EXTRACT(p_options, '$.run_anyway') = CAST('true' AS JSON), 1, 0);
        END IF;
        -- As `NewTask::check`: a period of 1 second to 100 years, a timeout of 1 second to a year.
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_for')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_for')) <> 'INTEGER'
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_for')) AS DECIMAL(40, 10))
                        <> CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_for')) AS DECIMAL(30))
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_for')) AS DECIMAL(30)) NOT BETWEEN 1 AND 3155760000 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid unique_for: not a whole number of seconds from 1 to 3155760000 (100 years)';
            END IF;
            -- (Through DECIMAL: MariaDB types 1e3 as an integer, which a cast to SIGNED refuses.)
            SET v_for = CAST(CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_for')) AS DECIMAL(30)) AS SIGNED);
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_states')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.unique_states'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_states')) <> 'STRING'
                    OR CAST(v_text AS BINARY) NOT IN ('unfinished', 'succeeded', 'any') THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid unique_states: not "unfinished", "succeeded" or "any"';
            END IF;
            SET v_states = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_timeout')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_timeout')) <> 'INTEGER'
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.run_timeout')) AS DECIMAL(40, 10))
                        <> CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.run_timeout')) AS DECIMAL(30))
                    OR CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.run_timeout')) AS DECIMAL(30)) NOT BETWEEN 1 AND 31557600 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid run_timeout: not a whole number of seconds from 1 to 31557600 (a year)';
            END IF;
            -- (Through DECIMAL: MariaDB types 1e3 as an integer, which a cast to SIGNED refuses.)
            SET v_timeout = CAST(CAST(JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.run_timeout')) AS DECIMAL(30)) AS SIGNED);
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.version')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.version'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.version')) <> 'STRING'
                    OR v_text COLLATE utf8mb4_bin NOT REGEXP '^[0-9a-f]{8,64}\\z' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid version: not a digest: 8 to 64 hex digits (a-f, 0-9)';
            END IF;
            SET v_version = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.after')) NOT IN ('NULL') THEN
            SET v_after = JSON_EXTRACT(p_options, '$.after');
            -- (MySQL writes the array it parsed as `[1, 2]`: a list of whole numbers has no other
            -- character and no second `[`, and each is read as text to hold it to 18 digits.
            -- MariaDB's pattern of repeated groups ran out of ICU's backtrack stack on 10,000 long
            -- ids, and a pattern looking for 19 digits out of its time.)
            IF JSON_TYPE(v_after) <> 'ARRAY' OR JSON_LENGTH(v_after) > 10000 OR v_after REGEXP '[^\\[\\]0-9, ]'
                    OR LOCATE('[', v_after, 2) > 0
                    OR EXISTS (SELECT 1 FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id VARCHAR(64) PATH '$')) AS a
                               WHERE a.id IS NULL OR CHAR_LENGTH(a.id) > 18) THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid after: not a JSON array of at most 10000 task ids';
            END IF;
            IF JSON_LENGTH(v_after) = 0 THEN
                SET v_after = NULL;
            END IF;
        END IF;
    END IF;
    IF v_unique IS NULL AND (v_for IS NOT NULL OR v_states IN ('succeeded', 'any')) THEN
        SET v_msg = LEFT(CONCAT('taskhost_add: invalid ', IF(v_for IS NOT NULL, 'unique_for', 'unique_states'),
            ': a unique period or states need a unique_key'), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF v_version IS NOT NULL THEN
        -- (Hex digits only: the start holds no pattern character.)
        SELECT COUNT(*), MIN(digest) INTO v_n, v_pinned FROM (
            SELECT digest FROM task_handler_versions WHERE handler = p_handler COLLATE utf8mb4_bin AND digest LIKE CONCAT(v_version, '%')
            LIMIT 2) AS found;
        IF v_n = 0 THEN
            SET v_msg = LEFT(CONCAT('taskhost_add: invalid version: handler ', p_handler, ' has no version ', v_version,
                ': see `taskhost versions ', p_handler, '`'), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        ELSEIF v_n > 1 THEN
            SET v_msg = LEFT(CONCAT('taskhost_add: invalid version: ', v_version, ' names several versions of handler ',
                p_handler, ': give more of it'), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        END IF;
    END IF;
    IF v_anyway = 1 AND v_after IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid run_anyway: it runs after no task';
    END IF;
    IF v_after IS NOT NULL THEN
        SET v_n = NULL;
        -- (A task its success deleted has its end kept: it succeeded, and the intake counts it met.)
        SELECT a.id INTO v_n FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a
        WHERE NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.id = a.id)
            AND NOT EXISTS (SELECT 1 FROM task_ends e WHERE e.max_id >= a.id AND e.max_id <= a.id - MOD(a.id, 4096) + 4095
                AND e.min_id <= a.id AND FIND_IN_SET(a.id, e.ids) > 0) LIMIT 1;
        IF v_n IS NOT NULL THEN
            SET v_msg = LEFT(CONCAT('taskhost_add: invalid after: there is no task ', v_n), 128);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        END IF;
        IF v_anyway = 0 THEN
            SELECT t.id INTO v_n FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a
            JOIN task_queue t ON t.id = a.id
            WHERE t.last_status = 'cancelled' OR (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL)
            LIMIT 1;
            IF v_n IS NOT NULL THEN
                SET v_msg = LEFT(CONCAT('taskhost_add: invalid after: task ', v_n,
                    ' is dead or cancelled, so this task would never run (unless run_anyway)'), 128);
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
            END IF;
        END IF;
    END IF;
    SET v_due = COALESCE(v_due, v_now);
    SET v_until = v_now + INTERVAL v_for SECOND;
    SET v_arriving = (v_key IS NOT NULL AND v_due <= v_now) OR v_after IS NOT NULL;
    -- A few tries, as an add through the API: the key's holder may end between the refused
    -- insert and the look for it.
    -- (Without `after` the task is one row, written by one statement: no transaction needed.)
    IF v_after IS NOT NULL THEN
        -- Whether the caller is in a transaction of its own (MySQL has no `@@in_transaction`): a
        -- savepoint outlives its statement only within a transaction (autocommit off counts: its
        -- first statement began one), so releasing it fails outside one. Guessing wrong either
        -- way would break a promise: a START TRANSACTION here commits the caller's.
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1305 SET v_own_tx = TRUE;
            SAVEPOINT taskhost_add_probe;
            RELEASE SAVEPOINT taskhost_add_probe;
        END;
    END IF;
    IF v_own_tx THEN
        -- Read committed, as the host's own: a task a success deletes while this add locks it is
        -- then found among the ends, not missed by the snapshot of the add's first read.
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
    END IF;
    IF v_after IS NOT NULL THEN
        -- The tasks it runs after of a queue that deletes its successes, each locked until the
        -- add commits, in id order (as the host's add and the worker's batches lock tasks, so that
        -- they do not deadlock), by its key (no scan: a scan under REPEATABLE READ would lock every
        -- row it read). A locking read sees what committed since the caller's snapshot: one a
        -- success deleted since the check above is refused as not there, and the others are kept
        -- when they succeed, so a success that would delete one waits for this add and then keeps
        -- it. A task of a queue that keeps its successes is not locked (the caller's transaction
        -- would hold back its success, and its worker's whole batch): the intake meets it.
        BEGIN
            DECLARE v_r BIGINT;
            DECLARE v_done BOOLEAN DEFAULT FALSE;
            DECLARE tasks CURSOR FOR SELECT DISTINCT a.id FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a
                ORDER BY a.id;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
            OPEN tasks;
            each_task: LOOP
                FETCH tasks INTO v_r;
                IF v_done THEN
                    LEAVE each_task;
                END IF;
                -- (A consistent read, its queue as the caller's snapshot has it: `IF EXISTS (SELECT …)`
                -- would lock the task's row in share mode until the caller's transaction ends.)
                SELECT COUNT(*) INTO v_n FROM task_queue t JOIN task_run_limits l ON l.name = CONCAT('queue:', t.queue)
                WHERE t.id = v_r AND l.on_success = 'delete';
                IF v_n > 0 THEN
                    SELECT COUNT(*) INTO v_n FROM task_queue WHERE id = v_r FOR UPDATE;
                    -- (Its end, by a consistent read: found where the caller's snapshot is newer than
                    -- the success, as in READ COMMITTED; a lock would hold the span's writers back.)
                    IF v_n = 0 AND NOT EXISTS (SELECT 1 FROM task_ends e WHERE e.max_id >= v_r AND e.max_id <= v_r - MOD(v_r, 4096) + 4095
                            AND e.min_id <= v_r AND FIND_IN_SET(v_r, e.ids) > 0) THEN
                        SET v_msg = LEFT(CONCAT('taskhost_add: invalid after: task ', v_r, ' is no longer there (its success deleted it)'), 128);
                        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
                    END IF;
                    UPDATE task_queue SET keep_row = 1 WHERE id = v_r AND keep_row IS NULL AND finished_on IS NULL;
                END IF;
            END LOOP;
            CLOSE tasks;
        END;
    END IF;
    WHILE v_try < 3 DO
        SET v_try = v_try + 1, v_dup = FALSE, v_id = NULL;
        IF v_unique IS NOT NULL THEN
            -- A key held past its period is let go, as an add through the API does.
            UPDATE task_queue SET active_unique_key = NULL WHERE active_unique_key = v_unique AND unique_until <= v_now;
        END IF;
        INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, max_retries,
            queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway,
            unique_until, unique_states, run_timeout, pinned_digest)
        VALUES (v_now, v_by, v_due, p_handler, p_data, v_attempts, v_queue, v_priority, v_unique, v_unique, v_key,
            IF(v_arriving, 'waiting', 'scheduled'), IF(v_arriving, -1, 0), v_anyway,
            -- The default states are written as none, as the host writes them.
            v_until, NULLIF(v_states, 'unfinished'), v_timeout, v_pinned);
        IF NOT v_dup THEN
            SET v_id = LAST_INSERT_ID();
            IF v_after IS NOT NULL THEN
                INSERT INTO task_deps (task_id, after_id, met)
                SELECT DISTINCT v_id, a.id, -1 FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a;
            END IF;
            SELECT v_id AS id;
            SET v_try = 4;
        ELSE
            -- A locking read: it sees a holder committed since the caller's snapshot.
            SELECT id INTO v_id FROM task_queue WHERE active_unique_key = v_unique FOR SHARE;
            IF v_id IS NOT NULL THEN
                SELECT v_id AS id;
                SET v_try = 4;
            END IF;
        END IF;
    END WHILE;
    IF v_try = 3 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: the task holding the unique key was not found';
    END IF;
    IF v_own_tx THEN
        COMMIT;
    END IF;
END;

DROP PROCEDURE IF EXISTS taskhost_add;
CREATE PROCEDURE taskhost_add(
    IN p_handler LONGTEXT CHARACTER SET utf8mb4,
    IN p_data    LONGTEXT CHARACTER SET utf8mb4,
    IN p_options LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
BEGIN
    -- The operator's limit, as the host last wrote it, which is never under 1 KiB: read only for
    -- more data than that, as a read costs a call 40 – 100 µs, a third of it (none: NULL, and the
    -- call is handed on to the whole procedure, which holds the default). A consistent read, not
    -- `SET … = (SELECT …)`: that one locks the row until the caller's transaction ends.
    DECLARE v_limit BIGINT DEFAULT 1024;
    -- (Data or options nested over 100 deep fail MySQL's JSON functions, naming nothing: the whole
    -- procedure names which.)
    DECLARE EXIT HANDLER FOR 3157 CALL taskhost_add_checked(p_handler, p_data, p_options);
    IF OCTET_LENGTH(p_data) > 1024 THEN
        SELECT MAX(v) INTO v_limit FROM task_counters WHERE name = 'max_data_bytes';
    END IF;
    IF p_options IS NULL THEN
        IF p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data COLLATE utf8mb4_bin) = 0 THEN
            INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue,
                priority, last_status, waiting_for, run_anyway)
            VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), p_handler, p_data, 5, 'default', 0, 'scheduled', 0, 0);
            -- (Signed, as the whole procedure answers: LAST_INSERT_ID() is unsigned.)
            SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id;
        ELSE
            CALL taskhost_add_checked(p_handler, p_data, p_options);
        END IF;
    ELSE
        -- Options: plain ones, and `run_at`, `unique_for`, `unique_states`, each plainly written.
        BEGIN
            DECLARE v_at LONGTEXT CHARACTER SET utf8mb4;
            DECLARE v_due DATETIME(6);
            DECLARE v_ok BOOLEAN DEFAULT TRUE;
            -- Only a call with these prepares their tests. (NULL for options that are not JSON:
            -- the next test refuses them.)
            IF JSON_VALID(p_options) AND JSON_CONTAINS_PATH(p_options, 'one', '$.run_at', '$.unique_for', '$.unique_states') THEN
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
                        AND CAST(JSON_VALUE(p_options, '$.unique_states') AS BINARY) IN ('unfinished', 'succeeded', 'any')))
                -- (A unique period, or states other than the default, without a unique key: the
                -- whole procedure refuses them; it takes the default, which is left to it.)
                AND (JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                    OR NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_for', '$.unique_states'));
            END IF;
            IF v_ok AND p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= v_limit
                    AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data COLLATE utf8mb4_bin) = 0 AND LOCATE('\\', p_options) = 0
                    AND JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT' AND (
                    JSON_LENGTH(JSON_REMOVE(p_options, '$.queue', '$.priority', '$.max_attempts', '$.run_timeout', '$.queued_by', '$.key', '$.unique_key', '$.run_at', '$.unique_for', '$.unique_states')) = 0
                    AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.queue')
                        OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) = 'STRING'
                            AND OCTET_LENGTH(JSON_VALUE(p_options, '$.queue')) <= 128
                            AND ORD(LEFT(JSON_VALUE(p_options, '$.queue'), 1)) BETWEEN 33 AND 126
                            AND ORD(RIGHT(JSON_VALUE(p_options, '$.queue'), 1)) BETWEEN 33 AND 126
                            AND JSON_VALUE(p_options, '$.queue') NOT IN ('', '*') AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.queue') COLLATE utf8mb4_bin) = 0))
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
                            AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.queued_by') COLLATE utf8mb4_bin) = 0))
                    -- (A queue, key or unique key beginning or ending past ASCII goes to the whole
                    -- procedure, whose pattern judges white space.)
                    AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.key')
                        OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) = 'STRING'
                            AND OCTET_LENGTH(JSON_VALUE(p_options, '$.key')) BETWEEN 1 AND 128
                            AND ORD(LEFT(JSON_VALUE(p_options, '$.key'), 1)) BETWEEN 33 AND 126
                            AND ORD(RIGHT(JSON_VALUE(p_options, '$.key'), 1)) BETWEEN 33 AND 126
                            AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.key') COLLATE utf8mb4_bin) = 0))
                    AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                        OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) = 'STRING'
                            AND OCTET_LENGTH(JSON_VALUE(p_options, '$.unique_key')) <= 255 AND JSON_VALUE(p_options, '$.unique_key') <> ''
                            AND ORD(LEFT(JSON_VALUE(p_options, '$.unique_key'), 1)) BETWEEN 33 AND 126
                            AND ORD(RIGHT(JSON_VALUE(p_options, '$.unique_key'), 1)) BETWEEN 33 AND 126
                            AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.unique_key') COLLATE utf8mb4_bin) = 0))) THEN
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
    END IF;
END;
