-- The row whose lock serializes runner registrations (so two runners cannot both take the last
-- place under the runner limit). On SQLite the write transaction alone excludes other writers;
-- the row is kept so that every database holds the same rows.
INSERT INTO task_leases (name, holder, expires_on) VALUES ('runner-registration', '', '1970-01-01 00:00:00.000000');
