//! What a run's waits for signals find (`await-signal`). The sandbox knows no SQL: the runner
//! hands it a reader, called once a name a run (at most [`MAX_NAMES`] names), so a guest
//! asking in a loop costs the database nothing more.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::bindings::taskhost::plugin::types;
use super::host::{MAX_SNOOZE, MIN_SNOOZE};
use crate::model::{check_signal_name, SignalFound, SignalId, SignalWait};

/// The most signal names one run may wait for.
pub const MAX_NAMES: usize = 16;

/// What a lookup of a signal comes to: what the wait finds, or why it could not be read.
pub type SignalRead = Pin<Box<dyn Future<Output = Result<SignalFound, String>> + Send>>;

/// Looks up, for the run's task, the signal of the name given.
#[derive(Clone)]
pub struct SignalReader(Arc<dyn Fn(String) -> SignalRead + Send + Sync>);

impl SignalReader {
    /// A reader calling `read` with the signal's name.
    pub fn new(read: impl Fn(String) -> SignalRead + Send + Sync + 'static) -> Self {
        SignalReader(Arc::new(read))
    }
}

impl fmt::Debug for SignalReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SignalReader")
    }
}

/// A run's waits: how to look a signal up, what each name's first lookup found (kept, errors
/// too), and the wait the run ends with if it returns ok.
#[derive(Default)]
pub(crate) struct Signals {
    reader: Option<SignalReader>,
    found: Vec<(String, Result<SignalFound, String>)>,
    /// Set by a `not-yet` answer: the run, if it returns ok, ends waiting.
    pub(crate) wait: Option<SignalWait>,
}

impl Signals {
    pub(crate) fn new(reader: Option<SignalReader>) -> Self {
        Signals { reader, ..Signals::default() }
    }

    /// Wait for `name` for at most `timeout_ms`: what the first lookup of the name found. A
    /// `not-yet` answer makes it the run's wait (the last call counts: a refused one leaves none).
    pub(crate) async fn wait_for(&mut self, name: String, timeout_ms: u64) -> Result<types::Signal, String> {
        let timeout = Duration::from_millis(timeout_ms);
        let checked = check_signal_name(&name).and_then(|()| match timeout {
            t if t < MIN_SNOOZE => Err(format!("a wait of {timeout_ms} ms is under the shortest, a second")),
            t if t > MAX_SNOOZE => Err(format!("a wait of {timeout_ms} ms is over the longest, 30 days")),
            _ => Ok(()),
        });
        if let Err(e) = checked {
            self.wait = None;
            return Err(e);
        }
        let found = match self.found.iter().find(|(n, _)| *n == name) {
            Some((_, found)) => found.clone(),
            None if self.found.len() >= MAX_NAMES => {
                self.wait = None;
                return Err(format!("a run may wait for at most {MAX_NAMES} signal names"));
            }
            None => {
                let found = match &self.reader {
                    None => Ok(SignalFound::NotYet { until: None }),
                    Some(SignalReader(read)) => read(name.clone()).await,
                };
                let found = found.map_err(|e| format!("the signal {name:?} could not be looked up: {e}"));
                self.found.push((name.clone(), found.clone()));
                found
            }
        }?;
        Ok(match found {
            SignalFound::Delivered { data, .. } => types::Signal::Delivered(data),
            SignalFound::TimedOut => types::Signal::TimedOut,
            SignalFound::NotYet { until } => {
                self.wait = Some(SignalWait { name, timeout, until });
                types::Signal::NotYet
            }
        })
    }

    /// The signals handed to the run: read, if it succeeds.
    pub(crate) fn delivered(&self) -> Vec<SignalId> {
        let ids = self.found.iter().filter_map(|(_, f)| match f {
            Ok(SignalFound::Delivered { id, .. }) => Some(*id),
            _ => None,
        });
        ids.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(found: SignalFound) -> SignalReader {
        SignalReader::new(move |_| {
            let found = found.clone();
            Box::pin(async move { Ok(found) })
        })
    }

    #[tokio::test]
    async fn a_signal_not_yet_sent_becomes_the_runs_wait_and_a_delivered_one_is_read() {
        let mut s = Signals::new(Some(reader(SignalFound::NotYet { until: None })));
        assert!(matches!(s.wait_for("ok".into(), 5_000).await, Ok(types::Signal::NotYet)));
        let wait = s.wait.clone().map(|w| (w.name, w.timeout));
        assert_eq!(wait, Some(("ok".to_string(), Duration::from_secs(5))));
        assert!(s.delivered().is_empty());
        let mut s = Signals::new(Some(reader(SignalFound::Delivered { id: 9, data: "{}".into() })));
        assert!(matches!(s.wait_for("ok".into(), 5_000).await, Ok(types::Signal::Delivered(d)) if d == "{}"));
        assert_eq!((s.delivered(), s.wait), (vec![9], None));
    }

    #[tokio::test]
    async fn names_timeouts_and_the_number_of_names_are_bounded() {
        let mut s = Signals::new(Some(reader(SignalFound::TimedOut)));
        assert!(s.wait_for(String::new(), 5_000).await.is_err());
        assert!(s.wait_for("ok".into(), 999).await.is_err());
        assert!(s.wait_for("ok".into(), 31 * 24 * 3600 * 1000).await.is_err());
        for n in 0..MAX_NAMES {
            assert!(matches!(s.wait_for(format!("s{n}"), 5_000).await, Ok(types::Signal::TimedOut)));
        }
        assert!(s.wait_for("one-more".into(), 5_000).await.is_err());
        // A name already looked up is answered again without a lookup.
        assert!(s.wait_for("s0".into(), 5_000).await.is_ok());
    }
}
