-- A task's status is checked by comparisons, not by an IN list (issue 50, session 84). SQLite builds
-- a CHECK's list of more than two constants into a temporary index at each statement that writes
-- the column, with the index's page cache: 87 KB allocated and freed for an INSERT of one task, a
-- claim, an end. Bench (BENCHMARKS.md, session 84): an INSERT of one task in a long transaction 7.3
-- -> 5.2 us; `taskhost_add`'s trigger no longer allocates more than glibc's trim threshold a call.
-- SQLite cannot alter a CHECK. Its documentation (ALTER TABLE, "Making Other Kinds Of Table Schema
-- Changes") allows editing the table's text in sqlite_schema for a change that leaves what is
-- stored alone, as this one does: the same statuses allowed, the same columns. The table made and
-- dropped after it changes the schema's version, so every other connection reads it again.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (last_status IN (''scheduled'', ''running'', ''success'', ''error'', ''timeout'', ''cancelled'',
                                              ''waiting''))',
    'CHECK (last_status = ''scheduled'' OR last_status = ''running'' OR last_status = ''success''
                              OR last_status = ''error'' OR last_status = ''timeout'' OR last_status = ''cancelled''
                              OR last_status = ''waiting'')')
WHERE type = 'table' AND name = 'task_queue';
PRAGMA writable_schema = OFF;
CREATE TABLE taskhost_schema_changed (x);
DROP TABLE taskhost_schema_changed;
