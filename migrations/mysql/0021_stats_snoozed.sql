-- Snoozed runs in the statistics (issue 47): a run that snoozes, or ends waiting for a signal, is
-- counted as such with the other endings, in the transaction that ends it.
ALTER TABLE task_stats ADD COLUMN snoozed BIGINT NOT NULL DEFAULT 0;
