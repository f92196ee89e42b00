-- Keys weighed by fuel (issue 48): the fuel a run each key's queued turns were laid by. A key's
-- average moves as its runs end, and the overseer's `key-fuel` re-lays the turns of its due
-- tasks when it has moved to more than twice, or under half, what they were laid by (NULL: a
-- turn a task, as a key's tasks queued before any of its runs ended are laid).
ALTER TABLE task_key_fuel ADD COLUMN laid_fuel BIGINT;
