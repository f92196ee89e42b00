-- MySQL (not MariaDB) runs this file in place of mysql/0008_cancelled.sql. MySQL keeps a column's
-- CHECK when the column is redefined, and adds the new one beside it (`<table>_chk_<n>`), so the
-- status that the old one lacks would be refused: the old CHECK is dropped by the name MySQL
-- gave it in 0001, and the new one named, to be dropped by name again (0017, 0019).
ALTER TABLE task_queue DROP CHECK task_queue_chk_1,
    ADD CONSTRAINT task_queue_last_status
        CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
ALTER TABLE task_runs DROP CHECK task_runs_chk_1,
    ADD CONSTRAINT task_runs_status
        CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
