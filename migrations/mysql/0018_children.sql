-- Tasks queued by runs (issue 47): a run's children are written with its end, each naming its
-- parent (the run's task) and how deep it is under tasks queued by runs (`[tasks] max_depth`).
-- MySQL has no partial index: NULLs are indexed too.
ALTER TABLE task_queue ADD COLUMN parent_id bigint NULL, ADD COLUMN depth bigint NOT NULL DEFAULT 0,
    ADD INDEX task_queue_parent (parent_id);
