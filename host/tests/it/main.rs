//! The integration tests, in one binary: one link of wasmtime, Cranelift and sqlx instead of one
//! a file, and the example handlers built once. A module an area; a test runs alone by its path
//! (`cargo test --release --test it worker::runs_a_task_and_stores_its_results`), an area by its
//! module (`--test it worker::`). The tests that stop their database server do so on servers of
//! their own (`chaos`), so they run beside the rest.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
#[macro_use]
mod suite;

mod bench;
mod binlog;
mod chaos;
mod children;
mod cli;
mod cli_config;
mod cli_limits;
mod cli_servers;
mod clients;
mod clocks;
mod control;
mod dashboard;
mod dependencies;
mod deploys;
mod dev;
mod docs;
mod docs_api;
mod events;
mod fence;
mod first_day;
mod given_back;
mod health;
mod hostile;
mod incremental;
mod joins;
mod kept_runs;
mod languages;
mod layers;
mod migrate_at_once;
mod network;
mod new_handlers;
mod observability;
mod openapi;
mod overseer;
mod overseer_lease;
mod pooler;
mod promises;
mod rate_limits;
mod sandbox;
mod schema;
mod sdk;
mod serve;
mod serve_limits;
mod signals;
mod snooze;
mod sockets;
mod sql_add;
mod sql_add_after;
mod sql_add_deployed;
mod sql_add_limit;
mod sql_add_mysql;
mod sql_add_postgres;
mod sql_add_text;
mod sql_add_upgrade;
mod store_mysql;
mod store_postgres;
mod store_sqlite;
mod unique;
mod unreadable_rows;
mod waits;
mod worker;
mod worker_servers;
