//! Time, injected: services and the runner read the time through a [`Clock`] so tests can
//! move it instead of sleeping.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// Where the time comes from.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The time now.
    fn now(&self) -> DateTime<Utc>;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    /// Move it to `to`.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = to;
    }

    /// Move it on by `by`.
    pub fn advance(&self, by: chrono::Duration) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A clock shared by the parts of a process.
pub type SharedClock = Arc<dyn Clock>;
