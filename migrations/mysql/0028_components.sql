-- Components published into the database (issue 49): `taskhost deploy` stores a handler's
-- component once by its sha256 (`task_components`, its bytes in pieces of at most 1 MiB in
-- `task_component_pieces`, within MySQL's packet), a handler's versions with who deployed them
-- and when (`task_handler_versions`), and each release, a deploy or a rollback, in order
-- (`task_handler_releases`): a handler's active version is its newest release's, read by each
-- claim, so that no run starts on a version once another's release is committed. A task may be
-- pinned to a version (`pinned_digest`).
CREATE TABLE task_components (
    digest     VARCHAR(64) NOT NULL PRIMARY KEY,
    size       BIGINT NOT NULL,
    pieces     BIGINT NOT NULL,
    stored_on  DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE task_component_pieces (
    digest  VARCHAR(64) NOT NULL,
    piece   BIGINT NOT NULL,
    data    LONGBLOB NOT NULL,
    PRIMARY KEY (digest, piece)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE task_handler_versions (
    handler      VARCHAR(255) NOT NULL,
    digest       VARCHAR(64) NOT NULL,
    manifest     LONGTEXT NULL,
    deployed_on  DATETIME(6) NOT NULL,
    deployed_by  VARCHAR(255) NOT NULL,
    PRIMARY KEY (handler, digest)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE task_handler_releases (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    handler      VARCHAR(255) NOT NULL,
    digest       VARCHAR(64) NOT NULL,
    released_on  DATETIME(6) NOT NULL,
    released_by  VARCHAR(255) NOT NULL,
    action       VARCHAR(16) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE INDEX task_handler_releases_handler ON task_handler_releases (handler, id);
ALTER TABLE task_queue ADD COLUMN pinned_digest VARCHAR(64) NULL;
CREATE INDEX task_queue_pinned ON task_queue (pinned_digest);
-- Bumped by each release, in its transaction, whose lock it is: releases are written one at a time
-- and a worker that reads it sees every release up to it committed (ids follow inserts, not commits).
INSERT INTO task_counters (name, v) VALUES ('releases', 0);
