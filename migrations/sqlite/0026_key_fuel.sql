-- Keys weighed by fuel (issue 48): a queue's `fuel_per_turn` spaces each of its keys' turns by
-- the fuel the key's runs burn on average, so a key whose runs burn ten times another's is
-- given a tenth of the turns. Each key's average in a queue is a row of `task_key_fuel`, written
-- at the end of each of its runs (not in `task_keys`, which adds lock: an end waiting for an add
-- that waits for a task the end holds would deadlock), read by its next add.
ALTER TABLE task_run_limits ADD COLUMN fuel_per_turn INTEGER;
CREATE TABLE task_key_fuel (
    queue  TEXT NOT NULL,
    name   TEXT NOT NULL,
    fuel   INTEGER NOT NULL,
    runs   INTEGER NOT NULL,
    PRIMARY KEY (queue, name)
);
