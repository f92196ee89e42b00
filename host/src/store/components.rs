//! Components published into the database (`taskhost deploy`): what the store keeps of them and
//! the [`Components`] part of the store that keeps it.
//!
//! A component is stored once, by the sha256 of its bytes, in pieces of at most
//! [`PIECE_BYTES`] (every database takes a value that size in one statement; MySQL's
//! `max_allowed_packet` may not take a whole component). A handler's **version** is a component
//! with the manifest it was deployed with, and who deployed it and when. Each deploy or rollback
//! is a **release**, kept in order; a handler's newest release names its **active** version.
//! Each claim reads a task's version from its handler's newest release (or the version it is
//! pinned to) in the claim's own statement, so once a release is committed no claim starts a run
//! of the version before it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;

/// Bytes of a component a row of `task_component_pieces` holds at most.
pub const PIECE_BYTES: usize = 1 << 20;

/// A component to deploy as a version of a handler (its bytes checked already).
#[derive(Debug, Clone, Copy)]
pub struct NewVersion<'a> {
    /// The handler's name.
    pub handler: &'a str,
    /// The component.
    pub bytes: &'a [u8],
    /// sha256 of `bytes`, hex.
    pub digest: &'a str,
    /// The manifest deployed with it (`NAME.toml`), if any.
    pub manifest: Option<&'a str>,
    /// Who deploys it (`user@host`, or the API's caller).
    pub by: &'a str,
}

/// What a deploy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    /// The release that made it active; None when it was active already, with the same manifest
    /// (nothing changed).
    pub release: Option<i64>,
    /// Its bytes were stored now (another handler's or an earlier deploy's copy serves
    /// otherwise).
    pub stored: bool,
}

/// A version of a handler, as `taskhost versions` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct HandlerVersion {
    /// The handler.
    pub handler: String,
    /// sha256 of its component, hex.
    pub digest: String,
    /// Its component's size in bytes.
    pub size: i64,
    /// The manifest deployed with it.
    pub manifest: Option<String>,
    /// When it was first deployed.
    pub deployed_on: DateTime<Utc>,
    /// Who first deployed it.
    pub deployed_by: String,
    /// Whether it is the handler's active version.
    pub active: bool,
    /// When it was last made active (deployed or rolled back to).
    pub released_on: Option<DateTime<Utc>>,
    /// Unfinished tasks pinned to it.
    pub pinned: i64,
}

/// A handler's active version, as a worker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveVersion {
    /// The handler.
    pub handler: String,
    /// sha256 of its component, hex.
    pub digest: String,
    /// The manifest deployed with it.
    pub manifest: Option<String>,
    /// The release that made it active.
    pub release: i64,
}

/// How a release came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum ReleaseAction {
    /// `taskhost deploy`.
    Deploy,
    /// `taskhost rollback`.
    Rollback,
}

impl ReleaseAction {
    /// As stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReleaseAction::Deploy => "deploy",
            ReleaseAction::Rollback => "rollback",
        }
    }

    /// As stored, read.
    pub fn parse(s: &str) -> Option<Self> {
        [ReleaseAction::Deploy, ReleaseAction::Rollback].into_iter().find(|a| a.as_str() == s)
    }
}

/// A release: a version made active.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Release {
    /// Its id, in release order.
    pub id: i64,
    /// The handler.
    pub handler: String,
    /// The version made active.
    pub digest: String,
    /// When.
    pub released_on: DateTime<Utc>,
    /// By whom.
    pub released_by: String,
    /// A deploy or a rollback.
    pub action: ReleaseAction,
}

/// What one batch of the overseer's retirement of versions did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    /// Versions deleted.
    pub versions: u64,
    /// Components deleted with them (no version of any handler is of them any more).
    pub components: u64,
    /// Those components' bytes.
    pub bytes: u64,
    /// The batch ended at its bytes' bound ([`RETIRED_BYTES_A_BATCH`]) with more to do.
    pub more: bool,
}

/// Bytes of components one batch of retirement deletes at most (past one component): a
/// transaction stays small however large components are (each row a piece, in MySQL's binary log
/// too).
pub const RETIRED_BYTES_A_BATCH: u64 = 64 << 20;

/// The store's part for components: deploys, versions, releases.
#[async_trait]
pub trait Components: Send + Sync {
    /// Store `version`'s component (unless stored already), record the version (a later deploy
    /// of the same component replaces its manifest) and make it the handler's active version
    /// with a release, in one transaction. Nothing changes when it is active already with the
    /// same manifest.
    async fn deploy(&self, version: &NewVersion<'_>, now: DateTime<Utc>) -> Result<Deployed>;
    /// A handler's versions, the newest deployed first.
    async fn versions(&self, handler: &str) -> Result<Vec<HandlerVersion>>;
    /// A handler's releases, the newest first, at most `limit`.
    async fn releases(&self, handler: &str, limit: u32) -> Result<Vec<Release>>;
    /// Make an earlier version active with a release: the version `to` (a digest, or a prefix of
    /// one naming one version) or, without it, the version active before the active one.
    /// Refused ([`Error::NoVersion`](crate::error::Error::NoVersion)) when there is none.
    async fn rollback(&self, handler: &str, to: Option<&str>, by: &str, now: DateTime<Utc>) -> Result<Release>;
    /// The newest release's id (0: none): what changes with every release, read often.
    async fn release_mark(&self) -> Result<i64>;
    /// Every deployed handler's active version.
    async fn active_versions(&self) -> Result<Vec<ActiveVersion>>;
    /// A handler's version, if it was deployed (`pinned` is not counted: 0).
    async fn version(&self, handler: &str, digest: &str) -> Result<Option<HandlerVersion>>;
    /// The digests of a handler's versions.
    async fn version_digests(&self, handler: &str) -> Result<Vec<String>>;
    /// The bytes of the component `digest`, if stored; refused when it is over `max_bytes`
    /// (read in pieces, checked as they come).
    async fn component(&self, digest: &str, max_bytes: u64) -> Result<Option<Vec<u8>>>;
    /// Delete at most `batch` versions that are not active, stopped being active (or were
    /// deployed, if never active) before `before` and have no unfinished task pinned to them,
    /// with the components no version is of any more; their releases are kept.
    async fn retire_versions(&self, before: DateTime<Utc>, batch: u32) -> Result<Retired>;
}
