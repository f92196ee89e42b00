-- Statistics per handler and queue, written with the outcomes in the same transaction: one row per
-- handler, queue, minute and runner (each worker writes its own rows, so workers never wait on
-- each other's). Rotation deletes tasks and runs, never these.
CREATE TABLE task_stats (
    handler      TEXT        NOT NULL,
    queue        TEXT        NOT NULL,
    bucket       TIMESTAMPTZ NOT NULL,
    runner       BIGINT      NOT NULL,
    succeeded    BIGINT      NOT NULL DEFAULT 0,
    failed       BIGINT      NOT NULL DEFAULT 0,
    timed_out    BIGINT      NOT NULL DEFAULT 0,
    cancelled    BIGINT      NOT NULL DEFAULT 0,
    timed        BIGINT      NOT NULL DEFAULT 0,
    duration_sum BIGINT      NOT NULL DEFAULT 0,
    duration_max BIGINT      NOT NULL DEFAULT 0,
    fueled       BIGINT      NOT NULL DEFAULT 0,
    fuel_sum     BIGINT      NOT NULL DEFAULT 0,
    fuel_max     BIGINT      NOT NULL DEFAULT 0,
    first_on     TIMESTAMPTZ NOT NULL,
    last_on      TIMESTAMPTZ NOT NULL,
    d0           BIGINT      NOT NULL DEFAULT 0,
    d1           BIGINT      NOT NULL DEFAULT 0,
    d2           BIGINT      NOT NULL DEFAULT 0,
    d3           BIGINT      NOT NULL DEFAULT 0,
    d4           BIGINT      NOT NULL DEFAULT 0,
    d5           BIGINT      NOT NULL DEFAULT 0,
    d6           BIGINT      NOT NULL DEFAULT 0,
    d7           BIGINT      NOT NULL DEFAULT 0,
    d8           BIGINT      NOT NULL DEFAULT 0,
    d9           BIGINT      NOT NULL DEFAULT 0,
    d10          BIGINT      NOT NULL DEFAULT 0,
    d11          BIGINT      NOT NULL DEFAULT 0,
    d12          BIGINT      NOT NULL DEFAULT 0,
    d13          BIGINT      NOT NULL DEFAULT 0,
    d14          BIGINT      NOT NULL DEFAULT 0,
    d15          BIGINT      NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX task_stats_key ON task_stats (handler, queue, bucket, runner);
