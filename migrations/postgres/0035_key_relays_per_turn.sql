-- A queue's fuel per turn changed live (issue 48) lays its keys' queued tasks again, as a key's weight
-- changed does: `limits set queue:Q --fuel-per-turn N` (or its clearing) writes a row here for each
-- key with turns in Q, holding the fuel per turn (0: none) its due tasks were laid by. NULL in
-- either column: laid by the one in force now (a row asked by the other change alone).
ALTER TABLE task_key_relays ALTER COLUMN laid_weight DROP NOT NULL, ADD COLUMN laid_per_turn BIGINT;
