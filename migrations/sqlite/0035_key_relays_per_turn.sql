-- A queue's fuel per turn changed live (issue 48) lays its keys' queued tasks again, as a key's weight
-- changed does: `limits set queue:Q --fuel-per-turn N` (or its clearing) writes a row here for each
-- key with turns in Q, holding the fuel per turn (0: none) its due tasks were laid by. NULL in
-- either column: laid by the one in force now (a row asked by the other change alone).
-- (SQLite cannot make a column nullable in place: the table is made again, its rows kept.)
CREATE TABLE task_key_relays_new (
    queue          TEXT NOT NULL,
    name           TEXT NOT NULL,
    laid_weight    INTEGER,
    asked          INTEGER NOT NULL,
    laid_per_turn  INTEGER,
    PRIMARY KEY (queue, name)
);
INSERT INTO task_key_relays_new (queue, name, laid_weight, asked)
    SELECT queue, name, laid_weight, asked FROM task_key_relays;
DROP TABLE task_key_relays;
ALTER TABLE task_key_relays_new RENAME TO task_key_relays;
