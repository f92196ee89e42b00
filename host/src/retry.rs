//! Retry decisions: a pure function of the failure count, the task's limits and the time.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng;

use crate::model::{BackoffSettings, NextStep};

/// Exponential backoff: the n-th consecutive failure waits `base * 2^(n-1)`, capped at `max`,
/// then spread by ±`jitter` so retries of many tasks do not arrive together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The first delay.
    pub base: Duration,
    /// The longest delay.
    pub max: Duration,
    /// Fraction of the delay, 0.0..=1.0.
    pub jitter: f64,
}

impl Backoff {
    /// The default first delay.
    pub const DEFAULT_BASE: Duration = Duration::from_secs(1);
    /// The default longest delay.
    pub const DEFAULT_MAX: Duration = Duration::from_secs(3600);
    /// The default spread.
    pub const DEFAULT_JITTER: f64 = 0.1;

    /// The task's own settings where it has them, these otherwise.
    pub fn for_task(&self, task: &BackoffSettings) -> Backoff {
        let ms = |v: Option<i64>, d: Duration| v.map(|v| Duration::from_millis(v.max(0) as u64)).unwrap_or(d);
        Backoff { base: ms(task.base_ms, self.base), max: ms(task.max_ms, self.max), jitter: self.jitter }
    }

    /// The delay before retrying after `failures` consecutive failures (1 = the first).
    /// `unit` in 0.0..1.0 picks the jitter; pass a random number.
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let exp = failures.saturating_sub(1).min(62);
        let raw = self.base.saturating_mul(1u32.checked_shl(exp.min(31)).unwrap_or(u32::MAX));
        let capped = raw.min(self.max);
        let spread = (unit.clamp(0.0, 1.0) * 2.0 - 1.0) * self.jitter.clamp(0.0, 1.0);
        capped.mul_f64((1.0 + spread).max(0.0))
    }

    /// The delay after `failures` consecutive failures, with random jitter: what every retry
    /// loop of the host sleeps.
    pub fn wait(&self, failures: u32) -> Duration {
        self.delay(failures, jitter_unit())
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Self::DEFAULT_BASE, max: Self::DEFAULT_MAX, jitter: Self::DEFAULT_JITTER }
    }
}

/// What happens after a failed run.
///
/// `failures` counts the consecutive failures including this one. The task gives up when the
/// error is not retryable or when it has failed `max_attempts` times in a row.
pub fn decide(
    failures: u32,
    max_attempts: u32,
    retryable: bool,
    backoff: &Backoff,
    now: DateTime<Utc>,
    unit: f64,
) -> NextStep {
    if !retryable || failures >= max_attempts {
        return NextStep::GiveUp;
    }
    let delay = backoff.delay(failures, unit);
    let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
    NextStep::RetryAt(now.checked_add_signed(delay).unwrap_or(now))
}

/// A random number for [`decide`]'s jitter.
pub fn jitter_unit() -> f64 {
    rand::rng().random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> Backoff {
        Backoff { jitter: 0.0, ..Backoff::default() }
    }

    #[test]
    fn delay_doubles_with_each_failure_and_is_capped() {
        let b = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(10), jitter: 0.0 };
        assert_eq!(b.delay(1, 0.5), Duration::from_secs(1));
        assert_eq!(b.delay(2, 0.5), Duration::from_secs(2));
        assert_eq!(b.delay(3, 0.5), Duration::from_secs(4));
        assert_eq!(b.delay(5, 0.5), Duration::from_secs(10));
        assert_eq!(b.delay(200, 0.5), Duration::from_secs(10));
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let b = Backoff { base: Duration::from_secs(100), max: Duration::from_secs(1000), jitter: 0.1 };
        assert_eq!(b.delay(1, 0.0), Duration::from_secs(90));
        assert_eq!(b.delay(1, 1.0), Duration::from_secs(110));
    }

    #[test]
    fn gives_up_when_not_retryable() {
        let now = Utc::now();
        assert_eq!(decide(1, 5, false, &no_jitter(), now, 0.5), NextStep::GiveUp);
    }

    #[test]
    fn gives_up_at_max_attempts() {
        let now = Utc::now();
        assert_eq!(decide(5, 5, true, &no_jitter(), now, 0.5), NextStep::GiveUp);
        assert_eq!(decide(0, 0, true, &no_jitter(), now, 0.5), NextStep::GiveUp);
    }

    #[test]
    fn retries_after_the_backoff_delay() {
        let now = Utc::now();
        let step = decide(2, 5, true, &no_jitter(), now, 0.5);
        assert_eq!(step, NextStep::RetryAt(now + chrono::Duration::seconds(2)));
    }

    #[test]
    fn task_settings_override_the_defaults() {
        let b = no_jitter().for_task(&BackoffSettings { base_ms: Some(50), max_ms: Some(120) });
        assert_eq!(b.delay(1, 0.5), Duration::from_millis(50));
        assert_eq!(b.delay(3, 0.5), Duration::from_millis(120));
    }
}
