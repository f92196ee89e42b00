-- Components published into the database (issue 49): `taskhost deploy` stores a handler's
-- component once by its sha256 (`task_components`, its bytes in pieces of at most 1 MiB in
-- `task_component_pieces`, within MySQL's packet), a handler's versions with who deployed them
-- and when (`task_handler_versions`), and each release, a deploy or a rollback, in order
-- (`task_handler_releases`): a handler's active version is its newest release's, read by each
-- claim, so that no run starts on a version once another's release is committed. A task may be
-- pinned to a version (`pinned_digest`).
CREATE TABLE task_components (
    digest     TEXT NOT NULL PRIMARY KEY,
    size       BIGINT NOT NULL,
    pieces     BIGINT NOT NULL,
    stored_on  TIMESTAMPTZ NOT NULL
);
CREATE TABLE task_component_pieces (
    digest  TEXT NOT NULL,
    piece   BIGINT NOT NULL,
    data    BYTEA NOT NULL,
    PRIMARY KEY (digest, piece)
);
CREATE TABLE task_handler_versions (
    handler      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    manifest     TEXT,
    deployed_on  TIMESTAMPTZ NOT NULL,
    deployed_by  TEXT NOT NULL,
    PRIMARY KEY (handler, digest)
);
CREATE TABLE task_handler_releases (
    id           BIGSERIAL PRIMARY KEY,
    handler      TEXT NOT NULL,
    digest       TEXT NOT NULL,
    released_on  TIMESTAMPTZ NOT NULL,
    released_by  TEXT NOT NULL,
    action       TEXT NOT NULL
);
CREATE INDEX task_handler_releases_handler ON task_handler_releases (handler, id);
ALTER TABLE task_queue ADD COLUMN pinned_digest TEXT;
CREATE INDEX task_queue_pinned ON task_queue (pinned_digest) WHERE pinned_digest IS NOT NULL;
-- Bumped by each release, in its transaction, whose lock it is: releases are written one at a time
-- and a worker that reads it sees every release up to it committed (ids follow inserts, not commits).
INSERT INTO task_counters (name, v) VALUES ('releases', 0);
