-- Keys' weights changed live (issue 48): `limits set key:K --weight N` (or its clearing) writes a
-- row here for each queue where the key has turns, holding the weight its due tasks were laid
-- by. The overseer's `key-fuel` lays those tasks' turns again by the weight now and takes the
-- row out; `asked` counts the changes, so a change made while a re-lay runs is not lost with it.
CREATE TABLE task_key_relays (
    queue        TEXT NOT NULL,
    name         TEXT NOT NULL,
    laid_weight  INTEGER NOT NULL,
    asked        INTEGER NOT NULL,
    PRIMARY KEY (queue, name)
);
