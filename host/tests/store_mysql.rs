//! The store suite on a real MariaDB/MySQL server (`scripts/test-services.sh` starts one; `make test`
//! runs it). A missing server fails these tests: it is never skipped.
//!
//! Each test gets its own database, so tests run in parallel on one server.

mod suite;

use taskhost::store::{self, SharedStore, StoreOptions};

mod common;

server_store_suite!(common::mysql_scratch(), taskhost::store::mysql::MySqlStore, "mysql://taskhost@127.0.0.1:1/test");
