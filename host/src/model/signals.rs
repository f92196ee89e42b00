//! Signals: named messages sent to a task (a human's approval, an external callback) that its
//! runs wait for (`await-signal`).
//!
//! A signal is kept until a run of its task reads it and succeeds; a run that waits for one not
//! yet sent ends `snoozed`, its task due again at the wait's timeout and marked as awaiting the
//! name, so that sending it makes the task due at once. The next run's wait for that name then
//! finds it, or, the timeout passed, finds it `timed-out`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{RunId, TaskId};

/// A signal's id.
pub type SignalId = i64;

/// The most signals sent to a task and not yet read: one more is refused.
pub const MAX_UNREAD_SIGNALS: u64 = 1000;

/// The longest signal name, in bytes.
pub const MAX_SIGNAL_NAME_BYTES: usize = 128;

/// Check a signal's name: 1 to 128 bytes, no control character; one line naming what is wrong.
pub fn check_signal_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a signal's name cannot be empty".into());
    }
    if name.len() > MAX_SIGNAL_NAME_BYTES {
        return Err(format!("a signal's name is at most {MAX_SIGNAL_NAME_BYTES} bytes; this one is {}", name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err("a signal's name cannot hold a control character".into());
    }
    // MySQL's comparison ignores trailing spaces: `a ` would be handed to a wait for `a`.
    if name.trim() != name {
        return Err("a signal's name cannot begin or end with a space".into());
    }
    Ok(())
}

/// A signal as `show` and the API list it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Signal {
    /// Its id.
    pub id: SignalId,
    /// Its task.
    pub task_id: TaskId,
    /// Its name.
    pub name: String,
    /// Its data, a JSON document (stored as text; written out as the JSON it is).
    #[serde(serialize_with = "super::json::stored")]
    #[cfg_attr(feature = "serve", schema(value_type = serde_json::Value))]
    pub data: String,
    /// When it was sent.
    pub sent_on: DateTime<Utc>,
    /// The run that read it and ended well; none while unread.
    pub read_by_run: Option<RunId>,
}

/// What sending a signal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct SignalSent {
    /// The signal's id.
    pub id: SignalId,
    /// Whether its task awaited it and is now due.
    pub woke: bool,
}

/// What the store holds for a run's wait for a signal: the oldest unread one of that name, and
/// what the task awaits since its last wait (name, timeout).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignalLookup {
    /// The oldest unread signal of the name: its id and data.
    pub unread: Option<(SignalId, String)>,
    /// The signal the task awaits, and until when.
    pub awaiting: Option<(String, DateTime<Utc>)>,
}

/// What a run's wait for a signal finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalFound {
    /// Sent.
    Delivered {
        /// The signal.
        id: SignalId,
        /// Its data.
        data: String,
    },
    /// Not yet.
    NotYet {
        /// The timeout of the task's wait for it already begun, if one was.
        until: Option<DateTime<Utc>>,
    },
    /// The task's wait for it ran out (by the database's clock).
    TimedOut,
}

impl SignalLookup {
    /// What a wait for `name` finds at `now` (the database's time).
    pub fn found(self, name: &str, now: DateTime<Utc>) -> SignalFound {
        if let Some((id, data)) = self.unread {
            return SignalFound::Delivered { id, data };
        }
        match self.awaiting {
            Some((awaited, until)) if awaited == name && until <= now => SignalFound::TimedOut,
            Some((awaited, until)) if awaited == name => SignalFound::NotYet { until: Some(until) },
            _ => SignalFound::NotYet { until: None },
        }
    }
}

/// A run that ends waiting for a signal: its name and when the wait times out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalWait {
    /// The signal's name.
    pub name: String,
    /// How long from the run's end, for a new wait.
    pub timeout: std::time::Duration,
    /// The timeout of the task's wait for it already begun, kept.
    pub until: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap_or_default()
    }

    #[test]
    fn a_signal_sent_is_delivered_whatever_the_task_awaited() {
        let l = SignalLookup { unread: Some((4, "{}".into())), awaiting: Some(("ok".into(), at(5))) };
        assert_eq!(l.found("ok", at(10)), SignalFound::Delivered { id: 4, data: "{}".into() });
    }

    #[test]
    fn a_wait_times_out_only_for_the_name_awaited_once_its_time_has_come() {
        let l = || SignalLookup { unread: None, awaiting: Some(("ok".into(), at(5))) };
        assert_eq!(l().found("ok", at(5)), SignalFound::TimedOut);
        assert_eq!(l().found("ok", at(4)), SignalFound::NotYet { until: Some(at(5)) });
        assert_eq!(l().found("other", at(9)), SignalFound::NotYet { until: None });
        assert_eq!(SignalLookup::default().found("ok", at(9)), SignalFound::NotYet { until: None });
    }

    #[test]
    fn a_name_is_checked_for_length_and_control_characters() {
        assert!(check_signal_name("approved").is_ok());
        assert!(check_signal_name("").is_err());
        assert!(check_signal_name(&"x".repeat(129)).is_err());
        assert!(check_signal_name("a\nb").is_err());
        assert!(check_signal_name("a ").is_err());
    }
}
