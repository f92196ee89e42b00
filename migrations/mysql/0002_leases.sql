-- Leases: which node runs the maintenance services, until when.
CREATE TABLE task_leases (
    name        VARCHAR(64)  NOT NULL PRIMARY KEY,
    holder      VARCHAR(255) NOT NULL,
    expires_on  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
