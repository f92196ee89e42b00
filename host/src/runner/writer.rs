//! The outcome writer of one worker: it applies every [`Release`] of a claimed run.
//!
//! Releases are applied in batches bounded by count and by bytes, each batch with one store call
//! ([`crate::store::Store::release_runs`]) in one transaction: outcomes, put-backs and the
//! records of runs stopped from outside alike. Only transient errors (connection lost, deadlock,
//! lock timeout, serialization failure) are retried, with backoff and jitter. Any other error
//! splits the batch, so the rest is applied, down to the one release the database refuses: a
//! refused outcome ends its run `error` with code `outcome-rejected`, naming the refused field; a
//! refused put-back of a run that could not start ends it as that failure; a refused record of a
//! stopped run loses only those lines. Once the worker's grace period is over the writer stops
//! retrying: a run whose release it could not apply stays `running` and the overseer times it
//! out (the task runs again).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::release::{Holding, PutBackWhy, Release};
use crate::error::Error;
use crate::model::{NextStep, Released, RunEnd, RunOutcome, RunRelease};
use crate::retry::Backoff;
use crate::sandbox::Failure;
use crate::store::SharedStore;

/// What the writer and the heartbeat tell each other.
#[derive(Debug, Default)]
pub(super) struct WriterHealth {
    /// Unix milliseconds since which the writer has been failing to write a batch; 0 = fine.
    pub stuck_since_ms: AtomicI64,
    /// Unix milliseconds of the latest successful database call (heartbeat or write).
    pub db_ok_ms: AtomicI64,
    pub finished: AtomicU64,
    /// Of the finished, those that succeeded.
    pub succeeded: AtomicU64,
    /// Of the finished, those that snoozed.
    pub snoozed: AtomicU64,
    pub rejected: AtomicU64,
    /// Runs left running: outcomes not written, and runs of a stopping worker not put back.
    pub abandoned: AtomicU64,
}

pub(super) fn unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub(super) struct OutcomeWriter {
    pub store: SharedStore,
    pub batch: usize,
    pub batch_bytes: usize,
    pub linger: Duration,
    /// Longest one write may take; longer counts as a failed try.
    pub write_timeout: Duration,
    pub health: Arc<WriterHealth>,
    /// Turns true when the grace period is over: stop retrying.
    pub give_up: watch::Receiver<bool>,
    /// Told after each batch: a draining worker waits for its last outcomes on it, not a poll.
    pub written: Arc<tokio::sync::Notify>,
}

/// Bytes an outcome adds to a batch.
pub(super) fn size_of(o: &RunOutcome) -> usize {
    let failure = o.failure().map_or(0, |f| f.code.len() + f.message.len());
    256 + o.results().map_or(0, str::len) + o.logs.as_ref().map_or(0, String::len) + failure
}

enum Written {
    Yes(Released),
    /// The grace period ended before the database took it.
    GaveUp,
    /// The database refused it (not a transient error).
    Refused(Error),
}

/// Bytes a release adds to a batch.
fn release_size(r: &Release) -> usize {
    match r {
        Release::Ended(o) => size_of(o),
        Release::PutBack { .. } => 64,
        Release::Stopped(s) => 256 + s.logs.as_ref().map_or(0, String::len),
    }
}

/// Of a batch, the releases that leave a run running when they are not applied.
fn runs_left(batch: &[Release]) -> u64 {
    batch.iter().filter(|r| !matches!(r, Release::Stopped(_))).count() as u64
}

impl OutcomeWriter {
    /// Apply releases as they come; what a run holds is let go once its release is applied.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<(Release, Holding)>) {
        let batch = self.batch.max(1);
        let mut buf = Vec::with_capacity(batch);
        while rx.recv_many(&mut buf, batch).await > 0 {
            // Let more releases arrive: one transaction for many runs.
            let until = tokio::time::Instant::now() + self.linger;
            while buf.len() < batch {
                let room = batch - buf.len();
                match tokio::time::timeout_at(until, rx.recv_many(&mut buf, room)).await {
                    Ok(n) if n > 0 => {}
                    _ => break,
                }
            }
            let (releases, holdings): (Vec<Release>, Vec<Holding>) = buf.drain(..).unzip();
            let mut chunk = Vec::new();
            let mut bytes = 0;
            for release in releases {
                let size = release_size(&release);
                if !chunk.is_empty() && bytes + size > self.batch_bytes {
                    self.write_all(std::mem::take(&mut chunk)).await;
                    bytes = 0;
                }
                bytes += size;
                chunk.push(release);
            }
            self.write_all(chunk).await;
            drop(holdings); // lets go of what the runs held
            self.written.notify_one();
        }
    }

    /// Apply a batch, splitting it around releases the database refuses.
    async fn write_all(&mut self, releases: Vec<Release>) {
        let mut pending = vec![releases];
        while let Some(mut batch) = pending.pop() {
            if batch.is_empty() {
                continue;
            }
            match self.write(&batch).await {
                Written::Yes(released) => self.applied(&batch, &released),
                Written::GaveUp => {
                    tracing::warn!(runs = batch.len(), "releases not applied before the end of the grace period");
                    self.health.abandoned.fetch_add(runs_left(&batch), Ordering::Relaxed);
                }
                Written::Refused(e) if batch.len() > 1 => {
                    tracing::warn!(runs = batch.len(), "the database refused a batch of releases, splitting it: {e}");
                    let second = batch.split_off(batch.len() / 2);
                    pending.push(second);
                    pending.push(batch);
                }
                Written::Refused(e) => match batch.pop() {
                    Some(Release::Ended(o)) => self.reject(&o, e).await,
                    Some(Release::PutBack { otherwise: Some(o), .. }) => pending.push(vec![Release::Ended(*o)]),
                    Some(Release::PutBack { run, why, .. }) => {
                        tracing::warn!(run_id = run, "could not put back a run ({why}): {e}");
                        // Nobody else puts it back once this worker is gone; otherwise the run
                        // watch (or the next heartbeat) finds it again.
                        if why == PutBackWhy::Exit {
                            self.health.abandoned.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Some(Release::Stopped(kept)) => {
                        tracing::warn!(run_id = kept.run_id, "could not keep a stopped run's logs: {e}")
                    }
                    None => {}
                },
            }
        }
    }

    /// Count and report what a batch the database took did.
    fn applied(&self, batch: &[Release], released: &Released) {
        for release in batch {
            match release {
                Release::Ended(o) => {
                    // When its end was committed (bench/wait.sh reads it beside the run's end).
                    tracing::debug!(task = o.task_id, "outcome written");
                    self.health.finished.fetch_add(1, Ordering::Relaxed);
                    match o.status() {
                        crate::model::RunStatus::Success => self.health.succeeded.fetch_add(1, Ordering::Relaxed),
                        crate::model::RunStatus::Snoozed => self.health.snoozed.fetch_add(1, Ordering::Relaxed),
                        _ => 0,
                    };
                }
                Release::PutBack { run, at, why, .. } if released.put_back.contains(run) => {
                    tracing::info!(run_id = run, %at, "run put back in the queue: {why}")
                }
                // Ended elsewhere meanwhile: nothing to do.
                Release::PutBack { .. } | Release::Stopped(_) => {}
            }
        }
    }

    /// One call. A data error is the batch's own: refused at once. Any other error is the
    /// database's state and is retried with backoff while the grace period lasts, except one
    /// that persists while the database answers other calls (e.g. MariaDB dropping the
    /// connection over a packet too large): after a few tries that is the batch's own too. A
    /// write that times out or waits on a lock never is: another session holds the rows, and
    /// the writer waits (past `writer_stuck_limit` the heartbeat stops, so others take over).
    async fn write(&mut self, batch: &[Release]) -> Written {
        let releases: Vec<RunRelease<'_>> = batch.iter().map(Release::as_store).collect();
        let backoff = Backoff { base: Duration::from_millis(50), max: Duration::from_secs(5), jitter: 0.5 };
        let first_failure = unix_ms();
        let mut failures = 0u32;
        let written = loop {
            if *self.give_up.borrow() {
                break Written::GaveUp;
            }
            let (result, waited) =
                match tokio::time::timeout(self.write_timeout, self.store.release_runs(&releases)).await {
                    Ok(r) => {
                        let contended = r.as_ref().is_err_and(Error::is_contention);
                        (r, contended)
                    }
                    Err(_) => {
                        (Err(Error::io("writing outcomes", std::io::Error::from(std::io::ErrorKind::TimedOut))), true)
                    }
                };
            match result {
                Ok(released) => {
                    self.health.db_ok_ms.store(unix_ms(), Ordering::Relaxed);
                    break Written::Yes(released);
                }
                Err(e) if e.is_data_error() => break Written::Refused(e),
                Err(e) => {
                    failures += 1;
                    let _ = self.health.stuck_since_ms.compare_exchange(
                        0,
                        first_failure,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    if !waited && failures >= 3 && self.health.db_ok_ms.load(Ordering::Relaxed) > first_failure {
                        break Written::Refused(e);
                    }
                    let wait = backoff.wait(failures);
                    tracing::warn!(runs = batch.len(), "writing outcomes failed, retrying in {wait:?}: {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.give_up.wait_for(|g| *g) => {}
                    }
                }
            }
        };
        // Whatever became of this batch, the writer is not stuck on it any more.
        self.health.stuck_since_ms.store(0, Ordering::Relaxed);
        written
    }

    /// The database refused this one outcome: end the run `error` / `outcome-rejected` instead,
    /// dropping what it refused. Tries keeping the results and logs, then without the results,
    /// then without the logs too; the first that is taken names the refused field.
    async fn reject(&mut self, o: &RunOutcome, e: Error) {
        let reason = crate::text::bounded(&e.to_string(), 1024, "…");
        let own = match o.failure() {
            Some(f) => format!("{} {}", o.status(), f.code),
            None => o.status().to_string(),
        };
        let tries = [("error code or message", true, true), ("results", false, true), ("logs", false, false)];
        for (field, keep_results, keep_logs) in tries {
            let bytes = match field {
                "results" => o.results().map_or(0, str::len),
                "logs" => o.logs.as_ref().map_or(0, String::len),
                _ => o.failure().map_or(0, |f| f.code.len() + f.message.len()),
            };
            let message = format!(
                "the database refused this run's {field} ({bytes} bytes): {reason}; the run itself ended {own}"
            );
            let replacement = RunOutcome {
                end: RunEnd::Failure {
                    failure: Failure::outcome_rejected(message),
                    partial_results: if keep_results { o.results().map(str::to_string) } else { None },
                    next: NextStep::GiveUp,
                },
                logs: if keep_logs { o.logs.clone() } else { None },
                ..o.clone()
            };
            match self.write(&[Release::Ended(replacement)]).await {
                Written::Yes(_) => {
                    tracing::error!(run_id = o.run_id, field, "outcome refused by the database: {reason}");
                    self.health.finished.fetch_add(1, Ordering::Relaxed);
                    self.health.rejected.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Written::GaveUp => break,
                Written::Refused(_) => continue,
            }
        }
        tracing::error!(run_id = o.run_id, "the database refused every form of this run's outcome: {reason}");
        self.health.abandoned.fetch_add(1, Ordering::Relaxed);
    }
}
