-- The index of keyed tasks holds scheduled tasks only (issue 48). PostgreSQL writes a new entry
-- in every index whose condition the row meets at each update that is not HOT, and a claim and
-- an end of a keyed task are two such updates: with the index holding every keyed task, a keyed
-- queue drained at 86 - 96 % of a keyless one; dropped, at about 100 %. Its reads (a key's due
-- tasks, its turns pruned, `queues --keys`) read running tasks by `task_queue_running`.
DROP INDEX task_queue_key;
CREATE INDEX task_queue_key ON task_queue (share_key) WHERE share_key IS NOT NULL AND last_status = 'scheduled';
