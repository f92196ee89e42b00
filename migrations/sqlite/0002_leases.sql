-- Leases: which node runs the maintenance services, until when.
CREATE TABLE task_leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_on  TEXT NOT NULL
);
