-- SQL enqueue (issue 50): a call with a plain `key` or `unique_key` takes `taskhost_add`'s short
-- path too. A key shares a queue fairly between an application's tenants and a unique key makes an
-- add idempotent; such calls went to `taskhost_add_checked`, 2.6 – 2.9× a plain INSERT of the row
-- (BENCHMARKS.md, session 64). The short path writes them as the whole procedure does: the key on
-- the row and the task `waiting` for the overseer's intake, which gives it its turn; the unique
-- key held by the task. A unique key another task holds is handed to the whole procedure, which
-- answers the holder's id or lets go a key held past its period. `CREATE OR REPLACE` keeps the
-- grants made on `taskhost_add`.

-- The same row as `taskhost_add_checked` writes for the call (a test compares them), for a call
-- whose options are none, or only these, each plainly valid (a strict part of what the whole
-- procedure takes): `queue` (ASCII letters, digits, `_ . : / -`), `priority`, `max_attempts`,
-- `run_timeout` (whole numbers written as such), `queued_by`, `key`, `unique_key`. Anything else, a JSON null included,
-- goes to `taskhost_add_checked`, which takes it or refuses it by name.
CREATE OR REPLACE PROCEDURE taskhost_add(
    IN p_handler LONGTEXT CHARACTER SET utf8mb4,
    IN p_data    LONGTEXT CHARACTER SET utf8mb4,
    IN p_options LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
BEGIN
    IF p_options IS NULL AND p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= 1048576
            AND JSON_VALID(p_data) AND LOCATE(CHAR(0), p_data) = 0 THEN
        INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, max_retries, queue, priority,
            last_status, waiting_for, run_anyway)
        VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), p_handler, p_data, 5, 'default', 0, 'scheduled', 0, 0);
        -- (Signed, as the whole procedure answers: LAST_INSERT_ID() is unsigned.)
        SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id;
    -- (Apart: MariaDB prepares a condition each time it is reached, its patterns compiled too.)
    ELSEIF p_handler COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,128}\\z' AND OCTET_LENGTH(p_data) <= 1048576 AND JSON_VALID(p_data)
            AND LOCATE(CHAR(0), p_data) = 0 AND JSON_VALID(p_options) AND JSON_TYPE(p_options) = 'OBJECT' AND (
                JSON_LENGTH(p_options) = JSON_CONTAINS_PATH(p_options, 'one', '$.queue')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.priority')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.max_attempts')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.run_timeout')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.queued_by')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.key')
                    + JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.queue')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.queue')) = 'STRING'
                        AND JSON_VALUE(p_options, '$.queue') COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_.:/-]{1,128}\\z'))
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
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.key')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.key')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.key')) BETWEEN 1 AND 128
                        AND JSON_VALUE(p_options, '$.key') NOT REGEXP '^[[:space:]]|[[:space:]]\\z'
                        AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.key')) = 0))
                AND (NOT JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key')
                    OR (JSON_TYPE(JSON_EXTRACT(p_options, '$.unique_key')) = 'STRING'
                        AND OCTET_LENGTH(JSON_VALUE(p_options, '$.unique_key')) BETWEEN 1 AND 255
                        AND LOCATE(CHAR(0), JSON_VALUE(p_options, '$.unique_key')) = 0))) THEN
        BEGIN
            -- A unique key another task holds (or held past its period, to be let go): the whole
            -- procedure answers its holder's id, or takes the key over.
            DECLARE v_dup BOOLEAN DEFAULT FALSE;
            DECLARE CONTINUE HANDLER FOR 1062 SET v_dup = TRUE;
            IF JSON_CONTAINS_PATH(p_options, 'one', '$.unique_key') THEN
                -- As the whole procedure does, and first: it locks the holder's entry for writing
                -- before the insert meets it. (The insert's duplicate alone would take a shared
                -- lock, and two callers holding it, each then letting go in the whole procedure,
                -- would deadlock each other's transaction.)
                UPDATE task_queue SET active_unique_key = NULL
                WHERE active_unique_key = JSON_VALUE(p_options, '$.unique_key') COLLATE utf8mb4_bin
                    AND unique_until <= UTC_TIMESTAMP(6);
            END IF;
            -- A keyed task due now waits for the intake, as the whole procedure writes it.
            INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, max_retries,
                queue, priority, unique_key, active_unique_key, share_key, last_status, waiting_for, run_anyway,
                run_timeout)
            VALUES (UTC_TIMESTAMP(6), JSON_VALUE(p_options, '$.queued_by'), UTC_TIMESTAMP(6), p_handler, p_data,
                COALESCE(CAST(JSON_VALUE(p_options, '$.max_attempts') AS SIGNED), 5),
                COALESCE(JSON_VALUE(p_options, '$.queue'), 'default'),
                COALESCE(CAST(JSON_VALUE(p_options, '$.priority') AS SIGNED), 0),
                JSON_VALUE(p_options, '$.unique_key'), JSON_VALUE(p_options, '$.unique_key'),
                JSON_VALUE(p_options, '$.key'),
                IF(JSON_CONTAINS_PATH(p_options, 'one', '$.key'), 'waiting', 'scheduled'),
                IF(JSON_CONTAINS_PATH(p_options, 'one', '$.key'), -1, 0), 0,
                CAST(JSON_VALUE(p_options, '$.run_timeout') AS SIGNED));
            IF v_dup THEN
                CALL taskhost_add_checked(p_handler, p_data, p_options);
            ELSE
                SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id;
            END IF;
        END;
    ELSE
        CALL taskhost_add_checked(p_handler, p_data, p_options);
    END IF;
END;
