//! The progress writer: reports of running handlers, coalesced and written in batches.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::model::ProgressUpdate;
use crate::store::SharedStore;

/// Longest a progress write may take (best effort: dropped after that).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Progress reports, coalesced; best effort: a failed write is dropped (the outcome carries the
/// final figures) and never holds up outcomes.
pub(super) async fn progress_loop(store: SharedStore, mut rx: mpsc::Receiver<ProgressUpdate>) {
    let mut buf = Vec::with_capacity(256);
    while rx.recv_many(&mut buf, 256).await > 0 {
        match tokio::time::timeout(WRITE_TIMEOUT, store.record_progress(&buf)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("recording progress failed: {e}"),
            Err(_) => tracing::warn!("recording progress timed out"),
        }
        buf.clear();
    }
}
