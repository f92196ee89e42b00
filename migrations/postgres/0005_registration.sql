-- The row whose lock (SELECT ... FOR UPDATE) serializes runner registrations, so that two runners
-- cannot both take the last place under the runner limit. It replaces an advisory lock, which
-- only PostgreSQL has.
INSERT INTO task_leases (name, holder, expires_on) VALUES ('runner-registration', '', '1970-01-01 00:00:00+00')
ON CONFLICT (name) DO NOTHING;
