-- A key's tasks by key alone (issue 48): with the state in the index too, each claim of a keyed
-- task moved its entry (a page of 10,000 keys' apart from the next), and a claim of tasks spread
-- over 10,000 keys cost 1.3 times one of keyless tasks on SQLite; without it, the same.
ALTER TABLE task_queue DROP KEY task_queue_key, ADD KEY task_queue_key (share_key);
