//! When a run goes back to the queue unrun and uncounted (the store's put-back transition,
//! applied by the writer as a [`super::release::Release::PutBack`]), for the two cases that take
//! a policy:
//! - it could not start for want of a host resource (the sandbox's pool was full): it is due
//!   again after 1 s, 2 s, 4 s … up to 30 s, for at most the worker's `put_back_limit`, then it
//!   fails as `host-busy`, as it does when it cannot be put back;
//! - a signal (or the memory cap) came while its claim was under way: the claim may finish
//!   within the grace period, and every run it claimed goes back. One that cannot is left to the
//!   exit, which times it out with its runner.
//!
//! The others (claimed ahead and found no slot, an orphan, fenced) are put back as they are found.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::claims::Claims;
use super::release::{PutBackWhy, Releases};
use crate::clock::SharedClock;
use crate::model::{ClaimedRun, RunId};
use crate::retry::{self, Backoff};

/// How long a run put back waits before it is due again, by how many times it was put back.
const PUT_BACK_BACKOFF: Backoff = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(30), jitter: 0.1 };

/// The runs this worker put back because they could not start: when first, and how often.
pub(super) struct PutBacks {
    limit: Duration,
    clock: SharedClock,
    seen: Mutex<HashMap<RunId, (Instant, u32)>>,
}

impl PutBacks {
    pub fn new(limit: Duration, clock: SharedClock) -> Self {
        PutBacks { limit, clock, seen: Mutex::default() }
    }

    /// When a run that could not start is due again, or None when it has been put back for the
    /// limit already (it fails). Forgets runs past twice the limit.
    pub fn due_again(&self, run: RunId) -> Option<DateTime<Utc>> {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, (first, _)| now.duration_since(*first) < self.limit.saturating_mul(2));
        let (first, count) = seen.entry(run).or_insert((now, 0));
        if now.duration_since(*first) >= self.limit {
            seen.remove(&run);
            return None;
        }
        *count += 1;
        let delay = PUT_BACK_BACKOFF.delay(*count, retry::jitter_unit());
        Some(self.clock.now() + chrono::Duration::from_std(delay).unwrap_or_default())
    }

    /// The run started (or ended otherwise): it starts afresh if it is ever put back again.
    pub fn forget(&self, run: RunId) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&run);
    }
}

/// What handing back a claim cut short by a signal took, and whether every run it claimed was
/// handed to the writer to put back (the writer counts those it could not).
#[derive(Debug, Clone, Copy)]
pub(super) struct CutClaim {
    /// When the reason to exit was seen: the grace is counted from it when no signal came.
    pub asked: tokio::time::Instant,
    /// False: a run claimed may be left running with no task executing it.
    pub all_back: bool,
}

/// Let a claim cut short by a signal finish within `grace`, and put back what it claimed (the
/// writer does, while the runs in flight finish). Cut off, its runs would be timed out at exit as
/// lost, each counting as a failure of its task.
pub(super) async fn hand_back_cut_claim(
    releases: &Releases,
    claims: &std::sync::Arc<Claims>,
    clock: &SharedClock,
    grace: Duration,
    claim: impl std::future::Future<Output = crate::error::Result<Vec<ClaimedRun>>>,
) -> CutClaim {
    let asked = tokio::time::Instant::now();
    let answered = match tokio::time::timeout(grace, claim).await {
        Ok(Ok(claimed)) => {
            if !claimed.is_empty() {
                tracing::info!(runs = claimed.len(), "runs claimed as the signal came go back to the queue");
            }
            // Held as any claimed run until put back (one put back as an orphan meanwhile is not).
            let held = claimed.into_iter().filter_map(|run| claims.hold(run.run_id));
            releases.put_back(held, clock.now(), PutBackWhy::Exit);
            true
        }
        Ok(Err(e)) => {
            tracing::warn!("a claim cut short by a signal failed: {e}");
            false
        }
        Err(_) => false,
    };
    CutClaim { asked, all_back: answered }
}
