-- Uniqueness over time (issue 48): a task's unique key may stay taken after the task ends
-- (`unique_states`: succeeded, or any; NULL: while unfinished, as before) and is let go at
-- `unique_until` (the period asked, from the task's queueing; NULL: none), whatever its state.
ALTER TABLE task_queue ADD COLUMN unique_until DATETIME(6) NULL, ADD COLUMN unique_states VARCHAR(16) NULL;
