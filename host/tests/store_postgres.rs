//! The store suite on a real PostgreSQL server (`scripts/test-services.sh` starts one; `make test`
//! runs it). A missing server fails these tests: it is never skipped.
//!
//! Each test gets its own schema in database `test`, so tests run in parallel on one server.

mod suite;

use taskhost::store::{self, SharedStore, StoreOptions};

mod common;

server_store_suite!(
    common::postgres_scratch(),
    taskhost::store::postgres::PostgresStore,
    "postgres://postgres@127.0.0.1:1/test",
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%task_runners%FOR SHARE%'"
);
