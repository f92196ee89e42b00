-- SQL enqueue (issue 50): text that is not UTF-8 is refused, naming the argument. SQLite keeps
-- whatever bytes a TEXT value is given (`CAST(X'FF' AS TEXT)`, a driver handed bytes), and a row
-- holding them could not be read by the host. No SQLite function checks UTF-8, so
-- `taskhost_add_text` walks a value's bytes (a recursive query, about 1 µs a byte past ASCII; a
-- run of ASCII is stepped over 8 or 64 bytes at a time), and only a value with a character
-- outside 1 to 127 is handed to it: ASCII is valid as it stands. (A NUL would end GLOB's reading,
-- but `taskhost_add`'s own trigger refuses a NUL in each of these arguments.)
--
-- The walk: `need` continuation bytes (80 to BF) still to come, the first of them within `lo` to
-- `hi` (narrower after E0, ED, F0 and F4: no overlong form, surrogate or code point past
-- 10FFFF); C0, C1 and F5 to FF never start a character.
CREATE VIEW taskhost_add_text AS SELECT NULL AS arg, NULL AS value WHERE 0;

CREATE TRIGGER taskhost_add_text INSTEAD OF INSERT ON taskhost_add_text
WHEN EXISTS (
    WITH RECURSIVE walk(i, need, lo, hi, bad) AS (
        SELECT 1, 0, X'80', X'BF', 0
        UNION ALL
        -- (A run of ASCII, 8 or 64 bytes, at once where no character is under way.)
        SELECT i + CASE WHEN need > 0 OR substr(CAST(NEW.value AS BLOB), i, 1) >= X'80'
                          OR CAST(substr(CAST(NEW.value AS BLOB), i, 8) AS TEXT) GLOB '*[^' || char(1) || '-' || char(127) || ']*'
                        THEN 1
                        WHEN CAST(substr(CAST(NEW.value AS BLOB), i, 64) AS TEXT) GLOB '*[^' || char(1) || '-' || char(127) || ']*'
                        THEN 8 ELSE 64 END,
            CASE WHEN need > 0 THEN need - 1
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) < X'80' THEN 0
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) BETWEEN X'C2' AND X'DF' THEN 1
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) BETWEEN X'E0' AND X'EF' THEN 2
                 ELSE 3 END,
            CASE WHEN need > 0 THEN X'80'
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) = X'E0' THEN X'A0'
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) = X'F0' THEN X'90'
                 ELSE X'80' END,
            CASE WHEN need > 0 THEN X'BF'
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) = X'ED' THEN X'9F'
                 WHEN substr(CAST(NEW.value AS BLOB), i, 1) = X'F4' THEN X'8F'
                 ELSE X'BF' END,
            CASE WHEN need > 0 THEN substr(CAST(NEW.value AS BLOB), i, 1) NOT BETWEEN lo AND hi
                 ELSE substr(CAST(NEW.value AS BLOB), i, 1) >= X'80'
                      AND substr(CAST(NEW.value AS BLOB), i, 1) NOT BETWEEN X'C2' AND X'F4' END
        FROM walk WHERE i <= length(CAST(NEW.value AS BLOB)) AND bad = 0
    )
    SELECT 1 FROM walk WHERE bad OR (i > length(CAST(NEW.value AS BLOB)) AND need > 0))
BEGIN
    SELECT RAISE(ABORT, 'taskhost_add: invalid data: not UTF-8 text') WHERE NEW.arg = 'data';
    SELECT RAISE(ABORT, 'taskhost_add: invalid queue: not UTF-8 text') WHERE NEW.arg = 'queue';
    SELECT RAISE(ABORT, 'taskhost_add: invalid unique_key: not UTF-8 text') WHERE NEW.arg = 'unique_key';
    SELECT RAISE(ABORT, 'taskhost_add: invalid key: not UTF-8 text') WHERE NEW.arg = 'key';
    SELECT RAISE(ABORT, 'taskhost_add: invalid queued_by: not UTF-8 text') WHERE NEW.arg = 'queued_by';
END;

-- A second trigger on the view, beside 0031's: whichever of the two runs first, a refusal here
-- aborts the whole statement, and with it anything the other wrote.
CREATE TRIGGER taskhost_add_utf8 INSTEAD OF INSERT ON taskhost_add
BEGIN
    INSERT INTO taskhost_add_text (arg, value)
    SELECT arg, value FROM (SELECT 'data' AS arg, NEW.data AS value UNION ALL SELECT 'queue', NEW.queue
        UNION ALL SELECT 'unique_key', NEW.unique_key UNION ALL SELECT 'key', NEW."key"
        UNION ALL SELECT 'queued_by', NEW.queued_by)
    WHERE typeof(value) = 'text' AND value GLOB '*[^' || char(1) || '-' || char(127) || ']*'
      -- Longer is refused by the other trigger for its length, unwalked: the walk's cost is bounded.
      AND length(CAST(value AS BLOB)) <= 1048576;
END;
