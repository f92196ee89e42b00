//! Versions retired by the overseer (`[overseer.versions]`): a version that is not its handler's
//! active one, stopped being active (or was deployed, if it never was) before the retention, and
//! no unfinished task is pinned to, is deleted; so is its component once no version of any
//! handler is of it. Its releases stay, as the history of what ran.

use chrono::{DateTime, Utc};

use super::lock_releases;
use crate::error::Result;
use crate::model::TaskState;
use crate::store::components::{Retired, RETIRED_BYTES_A_BATCH};
use crate::store::dialect::{transaction_read_committed, Dialect};
use crate::store::plumbing::Cells;
use crate::store::sql::args;
use crate::store::transitions::is_any;

/// At most `batch` versions that may go, the oldest deployed first.
fn retirable<D: Dialect>() -> String {
    let unfinished =
        is_any::<D>(&[TaskState::Waiting, TaskState::Scheduled, TaskState::Running, TaskState::AwaitingRetry]);
    // When it stopped being active: the handler's first release after its own last one.
    let superseded = "(SELECT min(s.released_on) FROM task_handler_releases s
                       WHERE s.handler = v.handler AND s.id > (SELECT max(m.id) FROM task_handler_releases m
                                                              WHERE m.handler = v.handler AND m.digest = v.digest))";
    format!(
        "SELECT v.handler, v.digest, c.size FROM task_handler_versions v
         JOIN task_components c ON c.digest = v.digest
         WHERE v.digest <> (SELECT a.digest FROM task_handler_releases a
                            WHERE a.id = (SELECT max(n.id) FROM task_handler_releases n WHERE n.handler = v.handler))
           AND COALESCE({superseded}, v.deployed_on) < $1
           AND NOT EXISTS (SELECT 1 FROM task_queue t
                           WHERE t.pinned_digest = v.digest AND t.task_handler_class = v.handler AND ({unfinished}))
         ORDER BY v.deployed_on, v.handler, v.digest
         LIMIT $2"
    )
}

/// One batch: at most `batch` versions retired, with the components no version is of any more.
pub async fn retire_versions<D: Dialect>(db: &D, before: DateTime<Utc>, batch: u32) -> Result<Retired> {
    let pick = retirable::<D>();
    let pick = &pick;
    transaction_read_committed(db, |t| {
        Box::pin(async move {
            // Under the releases' turn: no deploy or rollback makes one active while it goes. (A
            // task pinned to one just now, by a client that read it before, fails its run as
            // `handler-broken`, the version not deployed.)
            lock_releases(db, &mut t.tx).await?;
            let found = db.rows(Some(&mut t.tx), pick, args![before, batch]).await?;
            let mut retired = Retired::default();
            for r in &found {
                if retired.bytes >= RETIRED_BYTES_A_BATCH {
                    retired.more = true;
                    break;
                }
                let (handler, digest) = (r.text("handler")?.unwrap_or_default(), r.text("digest")?.unwrap_or_default());
                let gone = "DELETE FROM task_handler_versions WHERE handler = $1 AND digest = $2";
                db.exec(Some(&mut t.tx), gone, args![handler.as_str(), digest.as_str()]).await?;
                retired.versions += 1;
                let others = "SELECT handler FROM task_handler_versions WHERE digest = $1 LIMIT 1";
                if !db.rows(Some(&mut t.tx), others, args![digest.as_str()]).await?.is_empty() {
                    continue;
                }
                db.exec(Some(&mut t.tx), "DELETE FROM task_component_pieces WHERE digest = $1", args![digest.as_str()])
                    .await?;
                db.exec(Some(&mut t.tx), "DELETE FROM task_components WHERE digest = $1", args![digest.as_str()])
                    .await?;
                retired.components += 1;
                retired.bytes += u64::try_from(r.int("size")?.unwrap_or(0)).unwrap_or(0);
            }
            Ok(retired)
        })
    })
    .await
}
