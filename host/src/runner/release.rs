//! The one way out of this worker for a claimed run: a [`Release`], handed to the outcome writer
//! ([`super::writer`]), which applies it. A run ends with an outcome, goes back to the queue
//! unrun, or was stopped from outside; whoever finds which (the run's task, the claim loop, the
//! run watch, the heartbeat) sends that here and calls the database no further.
//!
//! Until its release is applied a run keeps what it holds ([`Holding`]): its entry among the
//! runs claimed ([`Held`]), so the run watch does not take it for an orphan and a stopping worker
//! waits for it (one left when the worker exits is left running, and the runner's time-out ends
//! it); its place among the runs not yet written, which bounds the claims; its outcome's bytes.

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::claims::Held;
use crate::model::{RunId, RunOutcome, RunRelease, StoppedRun};

/// How a claimed run leaves this worker.
#[derive(Debug)]
pub(super) enum Release {
    /// It ended: its outcome, written in the writer's next batch.
    Ended(RunOutcome),
    /// Back to the queue, unrun and uncounted, due at `at`. When that fails, `otherwise` is
    /// written in its place (a run that could not start fails as `host-busy`).
    PutBack { run: RunId, at: DateTime<Utc>, why: PutBackWhy, otherwise: Option<Box<RunOutcome>> },
    /// The database ended it elsewhere (cancelled, timed out): what it left, kept on its row.
    Stopped(StoppedRun),
}

impl Release {
    /// What the store applies (the why and the fallback stay with the writer).
    pub fn as_store(&self) -> RunRelease<'_> {
        match self {
            Release::Ended(o) => RunRelease::Ended(o),
            Release::PutBack { run, at, .. } => RunRelease::PutBack { run: *run, at: *at },
            Release::Stopped(s) => RunRelease::Stopped(s),
        }
    }
}

/// Why a run goes back to the queue unrun.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PutBackWhy {
    /// It could not start for want of a host resource (the sandbox's pool was full).
    HostBusy(String),
    /// Claimed ahead of a free slot, it found none in time.
    NoSlot,
    /// The database has it running here, but its claim's answer never came.
    AnswerLost,
    /// The fence stopped it, and heartbeats are back.
    Fenced,
    /// A signal or the memory cap came while it was claimed and not started.
    Exit,
}

impl std::fmt::Display for PutBackWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PutBackWhy::HostBusy(reason) => write!(f, "it could not start: {reason}"),
            PutBackWhy::NoSlot => f.write_str("claimed ahead, it found no free slot in time"),
            PutBackWhy::AnswerLost => f.write_str("its claim's answer was lost"),
            PutBackWhy::Fenced => f.write_str("the fence stopped it, and heartbeats are back"),
            PutBackWhy::Exit => f.write_str("the worker is stopping and it had not started"),
        }
    }
}

/// What a run holds until its release is applied (see the module's documentation).
#[derive(Debug)]
pub(super) struct Holding {
    /// Its entry among the runs claimed (ended by its drop).
    pub held: Held,
    /// Its place among the runs claimed and not yet written (a run started has one; kept for
    /// its drop, which lets it go).
    #[allow(dead_code)]
    pub place: Option<OwnedSemaphorePermit>,
    /// Its outcome's bytes among those waiting for the writer.
    pub bytes: Option<OwnedSemaphorePermit>,
}

impl Holding {
    /// A run's entry alone: a run not started, going back.
    pub fn of(held: Held) -> Self {
        Holding { held, place: None, bytes: None }
    }
}

/// Where releases are sent: the outcome writer.
#[derive(Debug, Clone)]
pub(super) struct Releases {
    tx: mpsc::UnboundedSender<(Release, Holding)>,
}

impl Releases {
    /// A channel to the writer.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<(Release, Holding)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Releases { tx }, rx)
    }

    /// Hand a run's release to the writer, with what it holds until then.
    pub fn send(&self, release: Release, holding: Holding) {
        // The writer stops only once every sender is gone: it cannot be closed here.
        if let Err(mpsc::error::SendError((release, _))) = self.tx.send((release, holding)) {
            tracing::warn!(?release, "the outcome writer is gone: this run's release is lost");
        }
    }

    /// Put each of `runs` back, due at `at`, for `why`.
    pub fn put_back(&self, runs: impl IntoIterator<Item = Held>, at: DateTime<Utc>, why: PutBackWhy) {
        for held in runs {
            let release = Release::PutBack { run: held.run(), at, why: why.clone(), otherwise: None };
            self.send(release, Holding::of(held));
        }
    }
}
