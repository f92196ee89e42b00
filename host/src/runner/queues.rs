//! The queues a worker claims from: the names it was given, or, given `*` (the default), every
//! queue that holds scheduled tasks, as the database lists them ([`Store::scheduled_queues`],
//! one index seek a queue). The list is read again before the claim that follows an empty one
//! (so a task in a new queue is claimed as soon as an idle worker wakes for it) and at least
//! every [`QueueChoice::REFRESH`] while the worker is busy; each claim names the queues, which
//! the claim index serves in order. A worker of every queue claims from the first
//! [`QueueChoice::MOST`] by name, and says so when there are more.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::{RunLimits, EVERY_QUEUE};
use crate::store::Store;

/// The queues of a worker, as given and as last read.
pub(super) struct QueueChoice {
    every: bool,
    /// The names given, or the queues read when `every`.
    names: Vec<String>,
    /// When `every`: until when `names` is taken as current (None: read before the next claim).
    fresh_until: Option<Instant>,
    /// Whether it said that it reads only the first [`QueueChoice::MOST`] queues.
    warned: bool,
}

impl QueueChoice {
    /// How long a busy worker of every queue claims from the queues it read, at most.
    pub const REFRESH: Duration = Duration::from_secs(1);
    /// Most queues a worker of every queue claims from (a claim names each).
    pub const MOST: u32 = 10_000;

    /// The queues `given` (`["*"]`: every queue).
    pub fn new(given: &[String]) -> Self {
        let every = given.iter().any(|q| q == EVERY_QUEUE);
        let mut names = if every { Vec::new() } else { given.to_vec() };
        // Each once: a claim seeks each queue it names.
        names.sort();
        names.dedup();
        QueueChoice { every, names, fresh_until: None, warned: false }
    }

    /// The queues to claim from now, read again when due (a failed read is the caller's to
    /// back off from, as from a failed claim).
    pub async fn current(&mut self, store: &dyn Store) -> crate::error::Result<Vec<String>> {
        if self.every && self.fresh_until.is_none_or(|t| Instant::now() >= t) {
            let names = store.scheduled_queues(Self::MOST).await?;
            if names.len() >= Self::MOST as usize && !self.warned {
                self.warned = true;
                let last = names.last().map_or("", String::as_str);
                tracing::warn!(
                    "at least {} queues hold scheduled tasks: this worker of every queue claims from the first {} by \
                     name (up to {last}); give the others workers of their own with --queues",
                    Self::MOST,
                    Self::MOST
                );
            }
            self.names = names;
            self.fresh_until = Some(Instant::now() + Self::REFRESH);
        }
        Ok(self.names.clone())
    }

    /// The last claim found nothing: read the queues again before the next one.
    pub fn found_nothing(&mut self) {
        self.fresh_until = None;
    }
}

/// The claims a claim of `queues` is made of, each with whether it is the limited claim: the
/// queues with a concurrency limit through the limited claim (a transaction that counts runs in
/// flight), the others by the plain one, so that one limited queue does not slow every claim of
/// a worker of every queue. A limit on a handler of `handlers` spans every queue: then one
/// limited claim of them all.
pub(super) fn claims_of(queues: &[String], handlers: &[String], limits: &RunLimits) -> Vec<(Vec<String>, bool)> {
    if queues.is_empty() {
        return Vec::new();
    }
    if limits.apply_to(&[], Some(handlers)) {
        return vec![(queues.to_vec(), true)];
    }
    let (limited, free): (Vec<String>, Vec<String>) = queues.iter().cloned().partition(|q| limits.limits_claims_of(q));
    [(limited, true), (free, false)].into_iter().filter(|(qs, _)| !qs.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(all: &[&str]) -> Vec<String> {
        all.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_limited_queues_take_the_limited_claim_unless_a_handler_is_limited() {
        let mut limits = RunLimits::default();
        let (queues, handlers) = (names(&["api", "bulk", "mail"]), names(&["echo", "fetch"]));
        assert_eq!(claims_of(&queues, &handlers, &limits), [(queues.clone(), false)]);
        limits.queues.insert("api".into(), crate::model::Limit { max_running: Some(2), ..Default::default() });
        let parts = claims_of(&queues, &handlers, &limits);
        assert_eq!(parts, [(names(&["api"]), true), (names(&["bulk", "mail"]), false)]);
        assert_eq!(claims_of(&names(&["api"]), &handlers, &limits), [(names(&["api"]), true)]);
        limits.handlers.insert("fetch".into(), crate::model::Limit { max_running: Some(1), ..Default::default() });
        assert_eq!(claims_of(&queues, &handlers, &limits), [(queues.clone(), true)]);
        assert!(claims_of(&[], &handlers, &limits).is_empty());
    }
}
