//! Components, versions and releases (see [`crate::store::components`]), written once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::SqlStore;
use crate::error::{Error, Result};
use crate::model::TaskState;
use crate::store::components::*;
use crate::store::dialect::{transaction_read_committed, Dialect};
use crate::store::plumbing::{Cells, TxOf};
use crate::store::rows;
use crate::store::sql::args;
use crate::store::transitions::is_any;

mod retire;

/// The releases' counter (migration 0027): locked by every deploy and rollback first, so that
/// releases are written one at a time (their ids then follow their commits), and bumped by each
/// release; what workers read to know one was made ([`release_mark`]).
pub(super) async fn lock_releases<D: Dialect>(db: &D, tx: &mut TxOf<D>) -> Result<()> {
    let lock = format!("SELECT v FROM task_counters WHERE name = 'releases'{}", D::FOR_UPDATE);
    if db.rows(Some(&mut *tx), &lock, &[]).await?.is_empty() {
        return Err(Error::CorruptRow { table: "task_counters", reason: "no releases counter".into() });
    }
    Ok(())
}

/// The newest release of the handler `$1`.
const NEWEST_RELEASE: &str = "SELECT id, handler, digest, released_on, released_by, action
     FROM task_handler_releases WHERE handler = $1 ORDER BY id DESC LIMIT 1";

fn read_release(r: &impl Cells) -> Result<Release> {
    let action = r.text("action")?.unwrap_or_default();
    let corrupt = |reason: String| Error::CorruptRow { table: "task_handler_releases", reason };
    Ok(Release {
        id: rows::id(r, "id")?,
        handler: r.text("handler")?.unwrap_or_default(),
        digest: r.text("digest")?.unwrap_or_default(),
        released_on: r.time("released_on")?.ok_or_else(|| corrupt("no released_on".into()))?,
        released_by: r.text("released_by")?.unwrap_or_default(),
        action: ReleaseAction::parse(&action).ok_or_else(|| corrupt(format!("unknown action {action:?}")))?,
    })
}

fn read_version(r: &impl Cells, active: Option<&str>) -> Result<HandlerVersion> {
    let digest = r.text("digest")?.unwrap_or_default();
    let corrupt = |reason: &str| Error::CorruptRow { table: "task_handler_versions", reason: reason.into() };
    Ok(HandlerVersion {
        handler: r.text("handler")?.unwrap_or_default(),
        active: active == Some(digest.as_str()),
        digest,
        size: r.int("size")?.unwrap_or(0),
        manifest: r.text("manifest")?,
        deployed_on: r.time("deployed_on")?.ok_or_else(|| corrupt("no deployed_on"))?,
        deployed_by: r.text("deployed_by")?.unwrap_or_default(),
        released_on: r.time("released_on")?,
        pinned: r.int("pinned")?.unwrap_or(0),
    })
}

/// A handler's versions (of one digest when `digest` is given), with their last release and
/// their unfinished pinned tasks.
fn versions_sql<D: Dialect>(one: bool) -> String {
    let unfinished =
        is_any::<D>(&[TaskState::Waiting, TaskState::Scheduled, TaskState::Running, TaskState::AwaitingRetry]);
    // One version is read to load it: its pinned tasks are not counted then (a count a load).
    let pinned = match one {
        true => "0".to_string(),
        false => format!(
            "(SELECT count(*) FROM task_queue t
              WHERE t.pinned_digest = v.digest AND t.task_handler_class = v.handler AND ({unfinished}))"
        ),
    };
    let one = if one { "AND v.digest = $2" } else { "" };
    format!(
        "SELECT v.handler, v.digest, c.size, v.manifest, v.deployed_on, v.deployed_by,
                (SELECT max(r.released_on) FROM task_handler_releases r
                 WHERE r.handler = v.handler AND r.digest = v.digest) AS released_on,
                {pinned} AS pinned
         FROM task_handler_versions v JOIN task_components c ON c.digest = v.digest
         WHERE v.handler = $1 {one}
         ORDER BY v.deployed_on DESC, v.digest"
    )
}

/// Store the component's pieces unless they are all there; whether they were stored now. The
/// component's row is written first: its lock makes a second deploy of the same bytes wait for
/// the first, then find them stored.
async fn store_component<D: Dialect>(db: &D, tx: &mut TxOf<D>, v: &NewVersion<'_>, now: DateTime<Utc>) -> Result<bool> {
    let pieces = v.bytes.len().div_ceil(PIECE_BYTES) as i64;
    let size = v.bytes.len() as i64;
    let row = format!(
        "INSERT INTO task_components (digest, size, pieces, stored_on) VALUES ($1, $2, $3, $4) {}",
        D::upsert("task_components", &["digest"], &[], &["size"], &[])
    );
    db.exec(Some(&mut *tx), &row, args![v.digest, size, pieces, now]).await?;
    let count = format!(
        "SELECT count(*) AS n, CAST(sum(length(data)) AS {}) AS bytes FROM task_component_pieces WHERE digest = $1",
        D::INT
    );
    let found = db.rows(Some(&mut *tx), &count, args![v.digest]).await?;
    let (n, bytes) = match found.first() {
        Some(r) => (r.int("n")?.unwrap_or(0), r.int("bytes")?.unwrap_or(0)),
        None => (0, 0),
    };
    // All there, and what they should be (a row changed since would keep the version from ever
    // loading): kept.
    if n == pieces && bytes == size && stored_digest(db, tx, v.digest, pieces).await?.as_deref() == Some(v.digest) {
        return Ok(false);
    }
    db.exec(Some(&mut *tx), "DELETE FROM task_component_pieces WHERE digest = $1", args![v.digest]).await?;
    let insert = "INSERT INTO task_component_pieces (digest, piece, data) VALUES ($1, $2, $3)";
    for (i, piece) in v.bytes.chunks(PIECE_BYTES).enumerate() {
        db.exec(Some(&mut *tx), insert, args![v.digest, i as i64, piece]).await?;
    }
    Ok(true)
}

/// The sha256 of the pieces stored for `digest`, read in order (None: one is missing).
async fn stored_digest<D: Dialect>(db: &D, tx: &mut TxOf<D>, digest: &str, pieces: i64) -> Result<Option<String>> {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    let piece = "SELECT data FROM task_component_pieces WHERE digest = $1 AND piece = $2";
    for i in 0..pieces {
        let found = db.rows(Some(&mut *tx), piece, args![digest, i]).await?;
        let Some(data) = found.first().map(|r| r.bytes("data")).transpose()?.flatten() else { return Ok(None) };
        hash.update(&data);
    }
    Ok(Some(hex::encode(hash.finalize())))
}

pub async fn deploy<D: Dialect>(db: &D, v: &NewVersion<'_>, now: DateTime<Utc>) -> Result<Deployed> {
    use sha2::Digest as _;
    if hex::encode(sha2::Sha256::digest(v.bytes)) != v.digest {
        return Err(Error::invalid("component", "its digest is not the sha256 of its bytes"));
    }
    transaction_read_committed(db, |t| {
        Box::pin(async move {
            lock_releases(db, &mut t.tx).await?;
            let stored = store_component(db, &mut t.tx, v, now).await?;
            let known = "SELECT manifest FROM task_handler_versions WHERE handler = $1 AND digest = $2";
            let found = db.rows(Some(&mut t.tx), known, args![v.handler, v.digest]).await?;
            let same_manifest = match found.first() {
                None => {
                    let insert =
                        "INSERT INTO task_handler_versions (handler, digest, manifest, deployed_on, deployed_by)
                                  VALUES ($1, $2, $3, $4, $5)";
                    db.exec(Some(&mut t.tx), insert, args![v.handler, v.digest, v.manifest, now, v.by]).await?;
                    false
                }
                Some(r) if r.text("manifest")?.as_deref() == v.manifest => true,
                Some(_) => {
                    let update = "UPDATE task_handler_versions SET manifest = $3 WHERE handler = $1 AND digest = $2";
                    db.exec(Some(&mut t.tx), update, args![v.handler, v.digest, v.manifest]).await?;
                    false
                }
            };
            let newest = db.rows(Some(&mut t.tx), NEWEST_RELEASE, args![v.handler]).await?;
            let active = newest.first().map(read_release).transpose()?;
            if same_manifest && active.is_some_and(|a| a.digest == v.digest) {
                if stored {
                    // Its pieces were rewritten (missing or changed): workers that could not load
                    // them try again.
                    let bump = "UPDATE task_counters SET v = v + 1 WHERE name = 'releases'";
                    db.exec(Some(&mut t.tx), bump, &[]).await?;
                }
                return Ok(Deployed { release: None, stored });
            }
            let release = insert_release(db, &mut t.tx, v.handler, v.digest, v.by, ReleaseAction::Deploy, now).await?;
            Ok(Deployed { release: Some(release), stored })
        })
    })
    .await
}

async fn insert_release<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    handler: &str,
    digest: &str,
    by: &str,
    action: ReleaseAction,
    now: DateTime<Utc>,
) -> Result<i64> {
    let insert = "INSERT INTO task_handler_releases (handler, digest, released_on, released_by, action)
                  VALUES ($1, $2, $3, $4, $5)";
    let id = db.insert(Some(&mut *tx), insert, args![handler, digest, now, by, action.as_str()]).await?;
    db.exec(Some(tx), "UPDATE task_counters SET v = v + 1 WHERE name = 'releases'", &[]).await?;
    Ok(id)
}

pub async fn versions<D: Dialect>(db: &D, handler: &str) -> Result<Vec<HandlerVersion>> {
    let active = active_digest(db, handler).await?;
    let found = db.rows(None, &versions_sql::<D>(false), args![handler]).await?;
    found.iter().map(|r| read_version(r, active.as_deref())).collect()
}

pub async fn version<D: Dialect>(db: &D, handler: &str, digest: &str) -> Result<Option<HandlerVersion>> {
    let active = active_digest(db, handler).await?;
    let found = db.rows(None, &versions_sql::<D>(true), args![handler, digest]).await?;
    found.first().map(|r| read_version(r, active.as_deref())).transpose()
}

async fn active_digest<D: Dialect>(db: &D, handler: &str) -> Result<Option<String>> {
    let newest = db.rows(None, NEWEST_RELEASE, args![handler]).await?;
    Ok(newest.first().map(read_release).transpose()?.map(|r| r.digest))
}

pub async fn version_digests<D: Dialect>(db: &D, handler: &str) -> Result<Vec<String>> {
    let sql = "SELECT digest FROM task_handler_versions WHERE handler = $1 ORDER BY digest";
    let found = db.rows(None, sql, args![handler]).await?;
    found.iter().map(|r| Ok(r.text("digest")?.unwrap_or_default())).collect()
}

pub async fn releases<D: Dialect>(db: &D, handler: &str, limit: u32) -> Result<Vec<Release>> {
    let sql = "SELECT id, handler, digest, released_on, released_by, action
               FROM task_handler_releases WHERE handler = $1 ORDER BY id DESC LIMIT $2";
    db.rows(None, sql, args![handler, limit]).await?.iter().map(read_release).collect()
}

pub async fn rollback<D: Dialect>(
    db: &D,
    handler: &str,
    to: Option<&str>,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Release> {
    let no = |reason: String| Error::NoVersion { handler: handler.to_string(), reason };
    transaction_read_committed(db, |t| {
        Box::pin(async move {
            // Releases take turns; read after the lock, so another's rollback just made is seen.
            lock_releases(db, &mut t.tx).await?;
            let sql = "SELECT id, handler, digest, released_on, released_by, action FROM task_handler_releases
                       WHERE handler = $1 ORDER BY id DESC";
            let found = db.rows(Some(&mut t.tx), sql, args![handler]).await?;
            let all: Vec<Release> = found.iter().map(read_release).collect::<Result<_>>()?;
            let Some(active) = all.first() else {
                return Err(no("nothing deployed: see `taskhost deploy`".into()));
            };
            let listed = "SELECT digest FROM task_handler_versions WHERE handler = $1";
            let versions = db.rows(Some(&mut t.tx), listed, args![handler]).await?;
            let kept: Vec<String> =
                versions.iter().map(|r| Ok(r.text("digest")?.unwrap_or_default())).collect::<Result<_>>()?;
            let digest = match to {
                Some(prefix) => {
                    let matching: Vec<&String> =
                        kept.iter().filter(|d| !prefix.is_empty() && d.starts_with(prefix)).collect();
                    match matching.as_slice() {
                        [one] => (*one).clone(),
                        [] => return Err(no(format!("no version {prefix}: see `taskhost versions {handler}`"))),
                        _ => return Err(no(format!("{prefix} names {} versions: give more of it", matching.len()))),
                    }
                }
                // The version active before (deleted by the overseer since: none; an older one
                // would surprise).
                None => match all.iter().find(|r| r.digest != active.digest) {
                    Some(before) if kept.contains(&before.digest) => before.digest.clone(),
                    Some(before) => {
                        let gone = short(&before.digest);
                        return Err(no(format!(
                            "the version before, {gone}, was deleted after its retention: give --to"
                        )));
                    }
                    None => return Err(no("no earlier version to roll back to".into())),
                },
            };
            if digest == active.digest {
                return Err(no(format!("{} is the active version already", short(&digest))));
            }
            let id = insert_release(db, &mut t.tx, handler, &digest, by, ReleaseAction::Rollback, now).await?;
            let release = Release {
                id,
                handler: handler.to_string(),
                digest,
                released_on: now,
                released_by: by.to_string(),
                action: ReleaseAction::Rollback,
            };
            Ok(release)
        })
    })
    .await
}

/// A digest as shown in a message: its first 12 characters.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

pub async fn release_mark<D: Dialect>(db: &D) -> Result<i64> {
    let found = db.rows(None, "SELECT v FROM task_counters WHERE name = 'releases'", &[]).await?;
    let mark = found.first().map(|r| r.int("v")).transpose()?.flatten();
    mark.ok_or_else(|| Error::CorruptRow { table: "task_counters", reason: "no releases counter".into() })
}

pub async fn active_versions<D: Dialect>(db: &D) -> Result<Vec<ActiveVersion>> {
    let sql = "SELECT r.handler, r.digest, r.id, v.manifest
               FROM task_handler_releases r
               JOIN task_handler_versions v ON v.handler = r.handler AND v.digest = r.digest
               WHERE r.id = (SELECT max(n.id) FROM task_handler_releases n WHERE n.handler = r.handler)
               ORDER BY r.handler";
    let found = db.rows(None, sql, &[]).await?;
    let read = |r: &D::Row| -> Result<ActiveVersion> {
        Ok(ActiveVersion {
            handler: r.text("handler")?.unwrap_or_default(),
            digest: r.text("digest")?.unwrap_or_default(),
            manifest: r.text("manifest")?,
            release: rows::id(r, "id")?,
        })
    };
    found.iter().map(read).collect()
}

pub async fn component<D: Dialect>(db: &D, digest: &str, max_bytes: u64) -> Result<Option<Vec<u8>>> {
    let sizes = db.rows(None, "SELECT size, pieces FROM task_components WHERE digest = $1", args![digest]).await?;
    let Some(row) = sizes.first() else { return Ok(None) };
    let (size, pieces) = (row.int("size")?.unwrap_or(0), row.int("pieces")?.unwrap_or(0));
    let corrupt = |reason: String| Error::CorruptRow { table: "task_component_pieces", reason };
    let size = u64::try_from(size).map_err(|_| corrupt(format!("{digest}: size {size}")))?;
    if size > max_bytes {
        return Err(Error::invalid("component", format!("{size} bytes, over the limit of {max_bytes} bytes")));
    }
    if u64::try_from(pieces).map_or(true, |n| n != size.div_ceil(PIECE_BYTES as u64)) {
        return Err(corrupt(format!("{digest}: {pieces} pieces for {size} bytes")));
    }
    // A piece at a time: never more than the component's size in memory, however many rows.
    let mut bytes = Vec::with_capacity(size as usize);
    // No piece longer than a piece may be is read at all.
    let piece = "SELECT data FROM task_component_pieces WHERE digest = $1 AND piece = $2 AND length(data) <= $3";
    for i in 0..pieces {
        let found = db.rows(None, piece, args![digest, i, PIECE_BYTES as i64]).await?;
        let data = found.first().map(|r| r.bytes("data")).transpose()?.flatten();
        let data = data.ok_or_else(|| corrupt(format!("{digest}: piece {i} of {pieces} is missing or too long")))?;
        if bytes.len() as u64 + data.len() as u64 > size {
            return Err(corrupt(format!("{digest}: more than its {size} bytes")));
        }
        bytes.extend_from_slice(&data);
    }
    if bytes.len() as u64 != size {
        return Err(corrupt(format!("{digest}: {} of its {size} bytes", bytes.len())));
    }
    Ok(Some(bytes))
}

#[async_trait]
impl<D: Dialect> Components for SqlStore<D> {
    async fn deploy(&self, version: &NewVersion<'_>, now: DateTime<Utc>) -> Result<Deployed> {
        deploy(&self.db, version, now).await
    }
    async fn versions(&self, handler: &str) -> Result<Vec<HandlerVersion>> {
        versions(&self.db, handler).await
    }
    async fn releases(&self, handler: &str, limit: u32) -> Result<Vec<Release>> {
        releases(&self.db, handler, limit).await
    }
    async fn rollback(&self, handler: &str, to: Option<&str>, by: &str, now: DateTime<Utc>) -> Result<Release> {
        rollback(&self.db, handler, to, by, now).await
    }
    async fn release_mark(&self) -> Result<i64> {
        release_mark(&self.db).await
    }
    async fn active_versions(&self) -> Result<Vec<ActiveVersion>> {
        active_versions(&self.db).await
    }
    async fn version(&self, handler: &str, digest: &str) -> Result<Option<HandlerVersion>> {
        version(&self.db, handler, digest).await
    }
    async fn version_digests(&self, handler: &str) -> Result<Vec<String>> {
        version_digests(&self.db, handler).await
    }
    async fn component(&self, digest: &str, max_bytes: u64) -> Result<Option<Vec<u8>>> {
        component(&self.db, digest, max_bytes).await
    }
    async fn retire_versions(&self, before: DateTime<Utc>, batch: u32) -> Result<Retired> {
        retire::retire_versions(&self.db, before, batch).await
    }
}
