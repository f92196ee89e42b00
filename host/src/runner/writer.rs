//! The outcome writer of one worker: it applies every [`Release`] of a claimed run.
//!
//! Outcomes are written in batches bounded by count and by bytes; the runs a batch puts back
//! go in one call, and each run stopped from outside on its own, every such call of a batch
//! within one bound in time. Only transient errors
//! (connection lost, deadlock, lock timeout, serialization failure) are retried, with backoff
//! and jitter. Any other error splits the batch, so the rest is written, down to the one
//! outcome the database refuses: that run is ended `error` with code `outcome-rejected`, naming
//! the refused field. Once the worker's grace period is over the writer stops retrying: what
//! it could not write stays `running` and the overseer times it out (the task runs again).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::release::{Holding, PutBackWhy, Release};
use super::LAST_CALL_TIMEOUT;
use crate::error::Error;
use crate::model::{NextStep, RunEnd, RunId, RunOutcome, StoppedRun};
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
    Yes,
    /// The grace period ended before the database took it.
    GaveUp,
    /// The database refused it (not a transient error).
    Refused(Error),
}

impl OutcomeWriter {
    /// Apply releases as they come; what a run holds is let go once its release is applied.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<(Release, Holding)>) {
        let batch = self.batch.max(1);
        let mut buf = Vec::with_capacity(batch);
        while rx.recv_many(&mut buf, batch).await > 0 {
            // Let more outcomes arrive: one transaction for many runs.
            let until = tokio::time::Instant::now() + self.linger;
            while buf.len() < batch {
                let room = batch - buf.len();
                match tokio::time::timeout_at(until, rx.recv_many(&mut buf, room)).await {
                    Ok(n) if n > 0 => {}
                    _ => break,
                }
            }
            let mut outcomes = Vec::new();
            // Every call of this batch's put-backs and stops within one bound: a database that
            // does not answer holds up the outcomes that long, not that long a run.
            let deadline = tokio::time::Instant::now() + LAST_CALL_TIMEOUT;
            let put_backs: Vec<_> = buf
                .iter()
                .filter_map(|(r, _)| match r {
                    Release::PutBack { run, at, why, otherwise } => Some((*run, *at, why, otherwise)),
                    _ => None,
                })
                .collect();
            let wanted: Vec<_> = put_backs.iter().map(|&(run, at, _, _)| (run, at)).collect();
            let done = self.put_back(&wanted, deadline).await;
            for ((run, at, why, otherwise), done) in put_backs.into_iter().zip(done) {
                match (done, otherwise) {
                    (Some(true), _) => tracing::info!(run_id = run, %at, "run put back in the queue: {why}"),
                    (Some(false), _) => {} // ended elsewhere meanwhile: nothing to do
                    (None, Some(outcome)) => outcomes.push((**outcome).clone()),
                    // Nobody else puts it back once this worker is gone.
                    (None, None) if *why == PutBackWhy::Exit => {
                        self.health.abandoned.fetch_add(1, Ordering::Relaxed);
                    }
                    // The run watch (or the next heartbeat) finds it again.
                    (None, None) => {}
                }
            }
            for (release, _) in &buf {
                match release {
                    Release::Ended(outcome) => outcomes.push(outcome.clone()),
                    Release::Stopped(kept) => self.keep_stopped(kept, deadline).await,
                    Release::PutBack { .. } => {}
                }
            }
            let mut chunk = Vec::new();
            let mut bytes = 0;
            for outcome in outcomes {
                let size = size_of(&outcome);
                if !chunk.is_empty() && bytes + size > self.batch_bytes {
                    self.write_all(std::mem::take(&mut chunk)).await;
                    bytes = 0;
                }
                bytes += size;
                chunk.push(outcome);
            }
            self.write_all(chunk).await;
            buf.clear(); // lets go of what the runs held
            self.written.notify_one();
        }
    }

    /// Put runs back in the queue, all in one call; for each, whether it was put back (false:
    /// it had ended elsewhere), or None when that failed (nothing was changed). A call that
    /// fails otherwise than by time is tried again run by run, so one run the database refuses
    /// does not keep the others running.
    async fn put_back(
        &self,
        runs: &[(RunId, chrono::DateTime<chrono::Utc>)],
        by: tokio::time::Instant,
    ) -> Vec<Option<bool>> {
        if runs.is_empty() {
            return Vec::new();
        }
        let failed = match tokio::time::timeout_at(by, self.store.put_back(runs)).await {
            Ok(Ok(back)) => return runs.iter().map(|(run, _)| Some(back.contains(run))).collect(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the database did not answer".to_string(),
        };
        if runs.len() == 1 || tokio::time::Instant::now() >= by {
            for (run, _) in runs {
                tracing::warn!(run_id = run, "could not put back a run: {failed}");
            }
            return vec![None; runs.len()];
        }
        let mut done = Vec::with_capacity(runs.len());
        for run in runs {
            // Past the bound, the rest are not tried (a call cut at once helps nobody).
            let one = if tokio::time::Instant::now() < by {
                Box::pin(self.put_back(std::slice::from_ref(run), by)).await.pop().flatten()
            } else {
                tracing::warn!(run_id = run.0, "could not put back a run: {failed}");
                None
            };
            done.push(one);
        }
        done
    }

    /// Keep what a run stopped from outside left on its row; a failure here loses only those lines.
    async fn keep_stopped(&self, kept: &StoppedRun, by: tokio::time::Instant) {
        match tokio::time::timeout_at(by, self.store.keep_stopped(kept)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(run_id = kept.run_id, "could not keep a stopped run's logs: {e}"),
            Err(_) => {
                tracing::warn!(run_id = kept.run_id, "could not keep a stopped run's logs: the database did not answer")
            }
        }
    }

    /// Write a batch, splitting it around outcomes the database refuses.
    async fn write_all(&mut self, outcomes: Vec<RunOutcome>) {
        let mut pending = vec![outcomes];
        while let Some(batch) = pending.pop() {
            if batch.is_empty() {
                continue;
            }
            match self.write(&batch).await {
                Written::Yes => {
                    self.health.finished.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    let ok = batch.iter().filter(|o| o.failure().is_none()).count();
                    self.health.succeeded.fetch_add(ok as u64, Ordering::Relaxed);
                }
                Written::GaveUp => {
                    tracing::warn!(runs = batch.len(), "outcomes not written before the end of the grace period");
                    self.health.abandoned.fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
                Written::Refused(e) if batch.len() > 1 => {
                    tracing::warn!(runs = batch.len(), "the database refused a batch of outcomes, splitting it: {e}");
                    let mut first = batch;
                    let second = first.split_off(first.len() / 2);
                    pending.push(second);
                    pending.push(first);
                }
                Written::Refused(e) => self.reject(&batch[0], e).await,
            }
        }
    }

    /// One write. A data error is the batch's own: refused at once. Any other error is the
    /// database's state and is retried with backoff while the grace period lasts, except one
    /// that persists while the database answers other calls (e.g. MariaDB dropping the
    /// connection over a packet too large): after a few tries that is the batch's own too. A
    /// write that times out or waits on a lock never is: another session holds the rows, and
    /// the writer waits (past `writer_stuck_limit` the heartbeat stops, so others take over).
    async fn write(&mut self, batch: &[RunOutcome]) -> Written {
        let backoff = Backoff { base: Duration::from_millis(50), max: Duration::from_secs(5), jitter: 0.5 };
        let first_failure = unix_ms();
        let mut failures = 0u32;
        let written = loop {
            if *self.give_up.borrow() {
                break Written::GaveUp;
            }
            let (result, waited) = match tokio::time::timeout(self.write_timeout, self.store.finish_runs(batch)).await {
                Ok(r) => {
                    let contended = r.as_ref().is_err_and(Error::is_contention);
                    (r, contended)
                }
                Err(_) => {
                    (Err(Error::io("writing outcomes", std::io::Error::from(std::io::ErrorKind::TimedOut))), true)
                }
            };
            match result {
                Ok(()) => {
                    self.health.db_ok_ms.store(unix_ms(), Ordering::Relaxed);
                    break Written::Yes;
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
            match self.write(std::slice::from_ref(&replacement)).await {
                Written::Yes => {
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
