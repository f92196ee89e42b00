-- The handlers each runner serves (a JSON list of names; NULL: not reported). The overseer gives up
-- tasks whose handler no live runner has served for a horizon.
ALTER TABLE task_runners ADD COLUMN handlers MEDIUMTEXT NULL;
