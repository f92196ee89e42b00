-- SQL enqueue (issue 50): the UTF-8 walk of `taskhost_add`'s text arguments (0036, bounded by the
-- data limit since 0037) walks each argument no longer than that argument may be: the data up to
-- its limit, at least 1 KiB (the configuration's least, so data the other trigger takes unread is
-- walked however the row was set), and the queue and keys at most 255 bytes (a longer one is
-- refused for its length). 0037 walked every argument up to the data limit: under a limit of
-- 4 MiB, a 2 MB queue was walked for seconds, holding the write lock, before its refusal. A
-- limit's row holding no number reads as 0.
DROP TRIGGER taskhost_add_utf8;

CREATE TRIGGER taskhost_add_utf8 INSTEAD OF INSERT ON taskhost_add
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
