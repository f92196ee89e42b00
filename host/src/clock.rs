//! Time, injected: services and the runner read the time through a [`Clock`] so tests can
//! move it instead of sleeping.
//!
//! On a database server, whose workers may run on many machines, the time is the server's
//! ([`ServerClock`]): what is due, heartbeats, leases, timeouts and slots are all judged on one
//! clock, whatever each machine's says.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// Where the time comes from.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The time now.
    fn now(&self) -> DateTime<Utc>;
    /// The clock to set from the database's readings, when this one follows the database's.
    fn follows_server(&self) -> Option<&ServerClock> {
        None
    }
}

/// The database server's time, read from here: the server's time at the latest reading plus the
/// time elapsed since on this machine's monotonic clock. This machine's wall clock, how far off
/// it is and how it jumps, changes nothing; until the first reading, it is what there is.
#[derive(Debug)]
pub struct ServerClock {
    /// This machine's wall clock: before the first reading, and to say how far off it is.
    local: SharedClock,
    /// The server's time at the reading kept, when that was here, and half its round trip (how
    /// far off it may be).
    reading: Mutex<Option<(DateTime<Utc>, Instant, Duration)>>,
    /// The server's time less this machine's, in milliseconds, as last read.
    skew_ms: AtomicI64,
    /// The skew last warned of (i64::MIN: none).
    warned_ms: AtomicI64,
}

impl ServerClock {
    /// A skew past this is logged as a warning (once, and again when it changes by as much).
    pub const WARN_SKEW: Duration = Duration::from_secs(1);
    /// How fast a reading kept grows less certain, as this machine's monotonic clock and the
    /// server's drift apart: 200 parts a million, generous (quartz keeps 50; a server's clock
    /// disciplined by NTP slews at most 500 while it corrects).
    pub const DRIFT_PER_SECOND: Duration = Duration::from_micros(200);

    /// A clock following the database's, `local` standing in until the first reading.
    pub fn new(local: SharedClock) -> Self {
        ServerClock {
            local,
            reading: Mutex::new(None),
            skew_ms: AtomicI64::new(0),
            warned_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// The server said `server` to a question sent at `sent` and answered at `received`: it
    /// read its clock about halfway, so that is when `server` was, here, give or take half the
    /// round trip. The reading kept is whichever is more certain now: a slow answer (a wait for a
    /// connection after an outage, a busy server) does not replace a quick one, which loses
    /// certainty only as the two clocks may drift apart (a second in an hour and a half at the
    /// rate allowed, for an answer that took two seconds).
    pub fn observe(&self, sent: Instant, server: DateTime<Utc>, received: Instant) {
        let half_trip = received.saturating_duration_since(sent) / 2;
        let at = sent + half_trip;
        let now_here = self.local.now() - chrono::Duration::from_std(received - at).unwrap_or_default();
        {
            let mut reading = self.reading.lock().unwrap_or_else(|p| p.into_inner());
            let keep = reading.is_some_and(|(kept_server, kept_at, kept_half)| {
                let drifted = Self::DRIFT_PER_SECOND.mul_f64(at.saturating_duration_since(kept_at).as_secs_f64());
                let kept_within = kept_half + drifted;
                // Two readings that cannot both be right: the server's clock moved (a step, a
                // failover, a machine paused), and the new one is taken however slow.
                let since = chrono::Duration::from_std(at.saturating_duration_since(kept_at)).unwrap_or_default();
                let apart = (server - (kept_server + since)).abs().to_std().unwrap_or_default();
                half_trip > kept_within + Duration::from_millis(5) && apart <= kept_within + half_trip
            });
            if keep {
                return;
            }
            *reading = Some((server, at, half_trip));
        }
        let skew = (server - now_here).num_milliseconds();
        self.skew_ms.store(skew, Ordering::Relaxed);
        let warned = self.warned_ms.load(Ordering::Relaxed);
        let limit = Self::WARN_SKEW.as_millis() as i64;
        let moved = warned == i64::MIN || skew.abs_diff(warned) > limit as u64;
        if skew.abs() > limit && moved {
            self.warned_ms.store(skew, Ordering::Relaxed);
            let (by, side) = (Duration::from_millis(skew.unsigned_abs()), if skew > 0 { "behind" } else { "ahead of" });
            tracing::warn!(
                skew_ms = -skew,
                "this machine's clock is {} {side} the database's; the database's time is used",
                crate::text::duration(by)
            );
        } else if skew.abs() <= limit && warned != i64::MIN {
            self.warned_ms.store(i64::MIN, Ordering::Relaxed);
        }
    }

    /// This machine's clock less the server's, as last read (positive: this machine is ahead).
    pub fn local_ahead_by(&self) -> chrono::Duration {
        chrono::Duration::milliseconds(-self.skew_ms.load(Ordering::Relaxed))
    }
}

impl Clock for ServerClock {
    fn now(&self) -> DateTime<Utc> {
        match *self.reading.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((server, at, _)) => server + chrono::Duration::from_std(at.elapsed()).unwrap_or_default(),
            None => self.local.now(),
        }
    }

    fn follows_server(&self) -> Option<&ServerClock> {
        Some(self)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_answer_does_not_replace_a_precise_reading_of_the_servers_clock() {
        let clock = ServerClock::new(Arc::new(SystemClock));
        let server = Utc::now() + chrono::Duration::hours(1);
        let now = Instant::now();
        clock.observe(now - Duration::from_millis(2), server, now);
        // Two seconds in all: the server may have read its clock anywhere in them (here near
        // their end), which agrees with the precise reading.
        clock.observe(now - Duration::from_secs(2), server + chrono::Duration::milliseconds(800), now);
        let off = (clock.now() - server).num_milliseconds();
        assert!((0..500).contains(&off), "the precise reading is kept: {off} ms");
        // Five seconds on where the precise one says one at most: the server's clock moved.
        clock.observe(now - Duration::from_secs(2), server + chrono::Duration::seconds(5), now);
        let off = (clock.now() - server).num_milliseconds();
        assert!((5_500..6_500).contains(&off), "a reading that cannot agree is taken (5 s, read 1 s ago): {off} ms");
        // As precise, or nearly: the later reading is taken.
        clock.observe(now - Duration::from_millis(6), server + chrono::Duration::seconds(5), now);
        let off = (clock.now() - server).num_milliseconds();
        assert!((4_000..6_000).contains(&off), "the later reading is taken: {off} ms");
    }

    #[test]
    fn a_slow_answer_after_a_long_outage_does_not_replace_a_reading_still_more_certain() {
        let clock = ServerClock::new(Arc::new(SystemClock));
        let server = Utc::now() + chrono::Duration::hours(1);
        let now = Instant::now();
        let then = now.checked_sub(Duration::from_secs(120)).expect("this machine has been up two minutes");
        clock.observe(then - Duration::from_millis(2), server - chrono::Duration::seconds(120), then);
        // Two minutes on, 6.5 s spent waiting for a connection: the server read its clock
        // anywhere in them (here at the end), and the quick reading is still within 30 ms.
        let at = now - Duration::from_millis(6_500);
        clock.observe(at, server, now);
        let off = (clock.now() - server).num_milliseconds();
        assert!((0..1_000).contains(&off), "the quick reading two minutes old is kept: {off} ms");
        // An hour and a half on, it may have drifted a second: a reading of two seconds is taken.
        let later = now + Duration::from_secs(5_400);
        clock.observe(later - Duration::from_secs(2), server + chrono::Duration::seconds(5_400), later);
        let kept = clock.reading.lock().map(|r| r.map(|(_, at, half)| (at, half))).expect("lock");
        assert_eq!(kept, Some((later - Duration::from_secs(1), Duration::from_secs(1))), "the later reading is taken");
    }
}
