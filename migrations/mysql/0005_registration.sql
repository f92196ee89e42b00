-- The row whose lock (SELECT ... FOR UPDATE) serializes runner registrations, so that two runners
-- cannot both take the last place under the runner limit. It replaces GET_LOCK, a session lock
-- that a connection returned to the pool could keep holding.
INSERT IGNORE INTO task_leases (name, holder, expires_on) VALUES ('runner-registration', '', '1970-01-01 00:00:00');
