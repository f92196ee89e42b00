-- Statistics per handler and queue, written with the outcomes in the same transaction: one row per
-- handler, queue, minute and runner (each worker writes its own rows, so workers never wait on
-- each other's). Rotation deletes tasks and runs, never these.
CREATE TABLE task_stats (
    handler      TEXT        NOT NULL,
    queue        TEXT        NOT NULL,
    bucket       TEXT        NOT NULL,
    runner       INTEGER     NOT NULL,
    succeeded    INTEGER     NOT NULL DEFAULT 0,
    failed       INTEGER     NOT NULL DEFAULT 0,
    timed_out    INTEGER     NOT NULL DEFAULT 0,
    cancelled    INTEGER     NOT NULL DEFAULT 0,
    timed        INTEGER     NOT NULL DEFAULT 0,
    duration_sum INTEGER     NOT NULL DEFAULT 0,
    duration_max INTEGER     NOT NULL DEFAULT 0,
    fueled       INTEGER     NOT NULL DEFAULT 0,
    fuel_sum     INTEGER     NOT NULL DEFAULT 0,
    fuel_max     INTEGER     NOT NULL DEFAULT 0,
    first_on     TEXT        NOT NULL,
    last_on      TEXT        NOT NULL,
    d0           INTEGER     NOT NULL DEFAULT 0,
    d1           INTEGER     NOT NULL DEFAULT 0,
    d2           INTEGER     NOT NULL DEFAULT 0,
    d3           INTEGER     NOT NULL DEFAULT 0,
    d4           INTEGER     NOT NULL DEFAULT 0,
    d5           INTEGER     NOT NULL DEFAULT 0,
    d6           INTEGER     NOT NULL DEFAULT 0,
    d7           INTEGER     NOT NULL DEFAULT 0,
    d8           INTEGER     NOT NULL DEFAULT 0,
    d9           INTEGER     NOT NULL DEFAULT 0,
    d10          INTEGER     NOT NULL DEFAULT 0,
    d11          INTEGER     NOT NULL DEFAULT 0,
    d12          INTEGER     NOT NULL DEFAULT 0,
    d13          INTEGER     NOT NULL DEFAULT 0,
    d14          INTEGER     NOT NULL DEFAULT 0,
    d15          INTEGER     NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX task_stats_key ON task_stats (handler, queue, bucket, runner);
