//! The store suite on a real PostgreSQL server (`scripts/test-services.sh` starts one; `make test`
//! runs it). A missing server fails these tests: it is never skipped.
//!
//! Each test gets its own schema in database `test`, so tests run in parallel on one server.

use crate::suite;

use taskhost::store::{self, SharedStore, StoreOptions};

use crate::common;

server_store_suite!(
    common::postgres_scratch(),
    taskhost::store::postgres::PostgresStore,
    "postgres://postgres@127.0.0.1:1/test",
    // Of this test's schema only (other tests' claims share the server): a waiting claim holds a
    // lock on its own schema's table while it waits for the row.
    "SELECT count(*) FROM pg_stat_activity a WHERE a.wait_event_type = 'Lock'
     AND a.query LIKE '%task_runners%FOR SHARE%'
     AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = 'task_runners'::regclass)"
);
