//! The store written once: [`SqlStore`] implements every [`Store`](super::interface::Store) method over a [`Dialect`](super::dialect::Dialect), each a short
//! function in one of the files here, generic over the dialect; the database's own file holds only what differs.
//! Every write of more than one statement is one transaction, run again after a deadlock ([`retrying`](super::dialect::retrying)).

mod bulk;
mod cancel;
mod components;
mod details;
pub(crate) mod events;
mod key_reads;
mod keys;
mod limit_rows;
mod limits;
mod per_key;
mod queues;
mod relay;
mod runners;
mod runs;
mod schedules;
mod settings;
mod sql_add_check;
mod sql_store;
mod store;
mod tables;
pub(crate) mod tasks;
mod upkeep;

pub use sql_store::SqlStore;
