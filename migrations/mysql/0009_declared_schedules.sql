-- Schedules declared in the operator's configuration file (1), kept in line with it by the
-- overseer, apart from those made with the command line or the library (0).
ALTER TABLE task_schedules ADD COLUMN declared BIGINT NOT NULL DEFAULT 0;
