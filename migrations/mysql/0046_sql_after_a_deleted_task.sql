-- `taskhost_add`'s `after` refused a task its success deleted (a queue with `on_success =
-- 'delete'`) as "there is no task N", where an add through the API or the CLI finds its end in
-- `task_ends` and counts it met. The procedure now looks for the end too (the intake, which drops a
-- dependency no longer there, counts it met). A row of `task_ends` holds tasks of one span of 4,096
-- ids (`transitions::ends::SPAN`): the end of task N is in a row whose greatest id lies from N to
-- its span's last id and whose least is at most N, read by the key. The procedure's own transaction
-- (a call outside one) is READ COMMITTED, as the host's are, so a task a success deletes while the
-- add locks it is found among the ends. In a caller's own REPEATABLE READ transaction (the server's
-- default) one deleted after that transaction's first read is still refused as no longer there:
-- its snapshot does not hold the end, and a locking read of the ends would hold back the span's
-- successes until the caller commits. Made again whole (`CREATE OR REPLACE` keeps the grants made
-- on it), as 0044 left it but for those checks.
CREATE OR REPLACE PROCEDURE taskhost_add_checked(
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
        SET v_msg = CONCAT('taskhost_add: invalid data: ', OCTET_LENGTH(p_data), ' bytes, over the limit of ', v_limit,
            ' bytes ([tasks] max_data_bytes)');
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF NOT JSON_VALID(p_data) OR LOCATE(CHAR(0), p_data) > 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: data is not valid JSON';
    END IF;
    IF p_options IS NOT NULL THEN
        IF NOT JSON_VALID(p_options) OR JSON_TYPE(p_options) <> 'OBJECT' THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid options: not a JSON object';
        END IF;
        -- (JSON_KEYS keeps a name's escapes as written.)
        IF LOCATE('\\', JSON_KEYS(p_options)) > 0 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                'taskhost_add: invalid options: an option name written with a JSON escape (\\u...); write it plainly';
        END IF;
        SELECT k INTO v_bad FROM JSON_TABLE(JSON_KEYS(p_options), '$[*]' COLUMNS (k VARCHAR(64) PATH '$')) AS j
        -- (BINARY: utf8mb4_bin pads with spaces, so `"queue "` passed as `queue` and was ignored.)
        WHERE BINARY k NOT IN ('queue', 'priority', 'run_at', 'unique_key', 'max_attempts', 'key', 'after', 'run_anyway',
                        'queued_by', 'unique_for', 'unique_states', 'run_timeout', 'version')
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            SET v_msg = CONCAT('taskhost_add: invalid options: unknown option ', QUOTE(v_bad),
                ' (queue, priority, run_at, unique_key, max_attempts, key, after, run_anyway, queued_by, unique_for,',
                ' unique_states, run_timeout, version)');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        END IF;
        -- A JSON null is the default, as an option left out.
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.queue'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) <> 'STRING' OR v_text IN ('', '*')
                    OR OCTET_LENGTH(v_text) > 128 OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z'
                    OR LOCATE(CHAR(0), v_text) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid queue: not a string, empty, *, over 128 bytes, or beginning or ending with white space (* means every queue to workers)';
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
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) <> 'STRING' OR v_text = ''
                    OR OCTET_LENGTH(v_text) > 255 OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z'
                    OR LOCATE(CHAR(0), v_text) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid unique_key: not a string, empty, over 255 bytes, or beginning or ending with white space';
            END IF;
            SET v_unique = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.key'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) <> 'STRING' OR v_text = '' OR OCTET_LENGTH(v_text) > 128
                    OR v_text REGEXP '^[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]|[\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]\\z' OR LOCATE(CHAR(0), v_text) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid key: not a string, empty, over 128 bytes, or beginning or ending with white space';
            END IF;
            SET v_key = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queued_by')) NOT IN ('NULL') THEN
            SET v_text = JSON_UNQUOTE(JSON_EXTRACT(p_options, '$.queued_by'));
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.queued_by')) <> 'STRING' OR OCTET_LENGTH(v_text) > 255
                    OR LOCATE(CHAR(0), v_text) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid queued_by: not a string, or over 255 bytes';
            END IF;
            SET v_by = v_text;
        END IF;
        IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_anyway')) NOT IN ('NULL') THEN
            IF JSON_TYPE(JSON_EXTRACT(p_options, '$.run_anyway')) <> 'BOOLEAN' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'taskhost_add: invalid run_anyway: not true or false';
            END IF;
            SET v_anyway = IF(JSON_EXTRACT(p_options, '$.run_anyway') = TRUE, 1, 0);
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
                    OR BINARY v_text NOT IN ('unfinished', 'succeeded', 'any') THEN
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
            IF JSON_TYPE(v_after) <> 'ARRAY' OR JSON_LENGTH(v_after) > 10000 OR v_after NOT REGEXP
                    '^\\[[[:space:]]*([0-9]{1,18}[[:space:]]*(,[[:space:]]*[0-9]{1,18}[[:space:]]*)*)?\\]\\z' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
                    'taskhost_add: invalid after: not a JSON array of at most 10000 task ids';
            END IF;
            IF JSON_LENGTH(v_after) = 0 THEN
                SET v_after = NULL;
            END IF;
        END IF;
    END IF;
    IF v_unique IS NULL AND (v_for IS NOT NULL OR v_states IN ('succeeded', 'any')) THEN
        SET v_msg = CONCAT('taskhost_add: invalid ', IF(v_for IS NOT NULL, 'unique_for', 'unique_states'),
            ': a unique period or states need a unique_key');
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF v_version IS NOT NULL THEN
        -- (Hex digits only: the start holds no pattern character.)
        SELECT COUNT(*), MIN(digest) INTO v_n, v_pinned FROM (
            SELECT digest FROM task_handler_versions WHERE handler = p_handler COLLATE utf8mb4_bin AND digest LIKE CONCAT(v_version, '%')
            LIMIT 2) AS found;
        IF v_n = 0 THEN
            SET v_msg = CONCAT('taskhost_add: invalid version: handler ', p_handler, ' has no version ', v_version,
                ': see `taskhost versions ', p_handler, '`');
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        ELSEIF v_n > 1 THEN
            SET v_msg = CONCAT('taskhost_add: invalid version: ', v_version, ' names several versions of handler ',
                p_handler, ': give more of it');
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
            SET v_msg = CONCAT('taskhost_add: invalid after: there is no task ', v_n);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
        END IF;
        IF v_anyway = 0 THEN
            SELECT t.id INTO v_n FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a
            JOIN task_queue t ON t.id = a.id
            WHERE t.last_status = 'cancelled' OR (t.last_status IN ('error', 'timeout') AND t.gave_up_on IS NOT NULL)
            LIMIT 1;
            IF v_n IS NOT NULL THEN
                SET v_msg = CONCAT('taskhost_add: invalid after: task ', v_n,
                    ' is dead or cancelled, so this task would never run (unless run_anyway)');
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
    IF @@in_transaction = 0 AND v_after IS NOT NULL THEN
        -- Read committed, as the host's own: a task a success deletes while this add locks it is
        -- then found among the ends, not missed by the snapshot of the add's first read.
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        SET v_own_tx = TRUE;
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
        FOR r IN (SELECT DISTINCT a.id FROM JSON_TABLE(v_after, '$[*]' COLUMNS (id BIGINT PATH '$')) AS a
                  ORDER BY a.id) DO
            -- (A consistent read, its queue as the caller's snapshot has it: `IF EXISTS (SELECT …)`
            -- would lock the task's row in share mode until the caller's transaction ends.)
            SELECT COUNT(*) INTO v_n FROM task_queue t JOIN task_run_limits l ON l.name = CONCAT('queue:', t.queue)
            WHERE t.id = r.id AND l.on_success = 'delete';
            IF v_n > 0 THEN
                SELECT COUNT(*) INTO v_n FROM task_queue WHERE id = r.id FOR UPDATE;
                -- (Its end, by a consistent read: found where the caller's snapshot is newer than
                -- the success, as in READ COMMITTED; a lock would hold the span's writers back.)
                IF v_n = 0 AND NOT EXISTS (SELECT 1 FROM task_ends e WHERE e.max_id >= r.id AND e.max_id <= r.id - MOD(r.id, 4096) + 4095
                        AND e.min_id <= r.id AND FIND_IN_SET(r.id, e.ids) > 0) THEN
                    SET v_msg = CONCAT('taskhost_add: invalid after: task ', r.id, ' is no longer there (its success deleted it)');
                    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
                END IF;
                UPDATE task_queue SET keep_row = 1 WHERE id = r.id AND keep_row IS NULL AND finished_on IS NULL;
            END IF;
        END FOR;
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
            SELECT id INTO v_id FROM task_queue WHERE active_unique_key = v_unique LOCK IN SHARE MODE;
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

