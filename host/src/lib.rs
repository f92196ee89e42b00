//! taskhost: a durable task queue kept in SQL whose handlers are sandboxed WebAssembly
//! components. The manual is the README and `docs/`.

#![warn(missing_docs)]
#![warn(clippy::too_many_lines)]

#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
compile_error!("taskhost needs at least one database: enable the cargo feature \"sqlite\", \"postgres\" or \"mysql\"");

#[cfg(feature = "serve")]
pub mod api;
pub mod app;
pub mod bench;
mod cache;
pub mod client;
pub mod clock;
pub mod config;
pub mod error;
pub mod located;
pub mod metrics;
pub mod model;
pub mod overseer;
pub mod plugins;
pub mod retry;
pub mod runner;
pub mod sandbox;
pub mod schedule;
pub mod stats;
pub mod store;
pub mod text;

pub use app::{App, AppConfig};
pub use client::Client;
pub use error::{Error, Result};
pub use model::codes;
pub use model::{Added, NewTask, RunStatus, RunnerStatus, Task};
