//! The one way out of this worker for a claimed run: a [`Release`], handed to the outcome writer
//! ([`super::writer`]), which applies it. A run ends with an outcome, goes back to the queue
//! unrun, or was stopped from outside; whoever finds which (the run's task, the claim loop, the
//! run watch, the heartbeat) sends that here and calls the database no further.
//!
//! Until its release is applied a run keeps what it holds ([`Holding`]): its place among the runs
//! not yet released, so a stopping worker waits for it; this worker's hold on it, so the run
//! watch does not take it for an orphan; its outcome's bytes. A release sent without a place (a
//! run the claim loop, the run watch or the heartbeat puts back) is counted open until it is
//! applied: a worker that exits with some open leaves runs running, and times its runner out so
//! they run again.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::run_watch::Held;
use super::writer::WriterHealth;
use crate::model::{RunId, RunOutcome, StoppedRun};

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
#[derive(Debug, Default)]
pub(super) struct Holding {
    /// Its place among the runs claimed and not yet released.
    pub place: Option<OwnedSemaphorePermit>,
    /// This worker's hold on it (kept for its drop, which lets it go).
    #[allow(dead_code)]
    pub held: Option<Held>,
    /// Its outcome's bytes among those waiting for the writer.
    pub bytes: Option<OwnedSemaphorePermit>,
}

/// Where releases are sent: the outcome writer.
#[derive(Debug, Clone)]
pub(super) struct Releases {
    tx: mpsc::UnboundedSender<(Release, Holding)>,
    health: Arc<WriterHealth>,
}

impl Releases {
    /// A channel to the writer, which counts what it applies in `health`.
    pub fn channel(health: Arc<WriterHealth>) -> (Self, mpsc::UnboundedReceiver<(Release, Holding)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Releases { tx, health }, rx)
    }

    /// Hand a run's release to the writer, with what it holds until then.
    pub fn send(&self, release: Release, holding: Holding) {
        let placeless = holding.place.is_none();
        if placeless {
            self.health.unreleased.fetch_add(1, Ordering::Relaxed);
        }
        // The writer stops only once every sender is gone: it cannot be closed here.
        if let Err(mpsc::error::SendError((release, _))) = self.tx.send((release, holding)) {
            tracing::warn!(?release, "the outcome writer is gone: this run's release is lost");
        }
    }

    /// Put each of `runs` back, due at `at`, for `why`.
    pub fn put_back(&self, runs: impl IntoIterator<Item = (RunId, Option<Held>)>, at: DateTime<Utc>, why: PutBackWhy) {
        for (run, held) in runs {
            let release = Release::PutBack { run, at, why: why.clone(), otherwise: None };
            self.send(release, Holding { held, ..Holding::default() });
        }
    }
}
