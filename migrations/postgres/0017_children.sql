-- Tasks queued by runs (issue 47): a run's children are written with its end, each naming its
-- parent (the run's task) and how deep it is under tasks queued by runs (`[tasks] max_depth`).
-- A task's children are found by the partial index, which holds only the children.
ALTER TABLE task_queue ADD COLUMN parent_id bigint;
ALTER TABLE task_queue ADD COLUMN depth bigint NOT NULL DEFAULT 0;
CREATE INDEX task_queue_parent ON task_queue (parent_id) WHERE parent_id IS NOT NULL;
