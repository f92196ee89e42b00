//! A worker that cannot prove it is alive stops its guests before anyone else may run them.
//!
//! An overseer (on any machine) times out a runner whose last heartbeat, written in the
//! database's time, is older than the heartbeat horizon H, and its runs then run again elsewhere.
//! The worker measures on its own monotonic clock the time since it *sent* its last heartbeat
//! that succeeded: the row says a time no earlier than that, give or take the clock's reading
//! error (half a round trip). Once that passes H less a margin M, the worker fences itself: it
//! stops every run in flight and claims nothing. So its guests stop at least M before an
//! overseer may declare it dead; M (the larger of a third of H and one heartbeat interval: 10 s
//! by default) covers the clock reading, the guest's stop (an epoch tick, or a host call's own
//! timeout) and the watch's period. When a heartbeat succeeds again the fence lifts and the runs
//! it stopped are put back in the queue, uncounted (a run the overseer timed out meanwhile is
//! left as it is: the put-back is guarded by the run's state).
//!
//! What it does not cover: a process paused (SIGSTOP, a frozen machine) runs its guests on
//! resumption until the watch next looks (100 ms); their outcomes are then ignored, but what
//! they did outside in that time is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::claims::Claims;

/// How often the fence looks at the time since the last heartbeat.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// When the runs of a worker must stop for want of a heartbeat.
#[derive(Debug)]
pub(super) struct Fence {
    /// When the last heartbeat that succeeded was sent.
    last_ok: Mutex<Instant>,
    /// Fence this long after it.
    after: Duration,
    fenced: AtomicBool,
}

impl Fence {
    /// A fence for a worker heartbeating every `interval` and declared dead after `horizon`;
    /// it counts from now (the runner's registration is its first heartbeat).
    pub fn new(interval: Duration, horizon: Duration) -> Self {
        Fence {
            last_ok: Mutex::new(Instant::now()),
            after: Self::after(interval, horizon),
            fenced: AtomicBool::new(false),
        }
    }

    /// H − max(H / 3, interval), and never less than two intervals (a horizon of under three
    /// intervals leaves no room for a margin: the overseer's own check is then the only bound).
    pub fn after(interval: Duration, horizon: Duration) -> Duration {
        horizon.saturating_sub((horizon / 3).max(interval)).max(interval * 2)
    }

    /// A heartbeat sent at `sent` succeeded (the runs it stopped, parked in [`Claims`], are the
    /// heartbeat's to put back).
    pub fn alive(&self, sent: Instant) {
        let mut last = self.last_ok.lock().unwrap_or_else(|p| p.into_inner());
        *last = (*last).max(sent);
        if self.fenced.swap(false, Ordering::SeqCst) {
            tracing::warn!("heartbeats are back: claiming again");
        }
    }

    /// A fence already up (for tests of what it stops).
    #[cfg(test)]
    pub fn up() -> Self {
        let fence = Fence::new(Duration::from_secs(1), Duration::from_secs(3));
        fence.fenced.store(true, Ordering::SeqCst);
        fence
    }

    /// Whether runs must not start.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Fence when the last heartbeat is too old, stopping every run in flight (again at each
    /// look while fenced: a run claimed just before starts and is stopped at once).
    fn look(&self, claims: &Claims) {
        let since = self.last_ok.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        if since <= self.after {
            return;
        }
        let runs = claims.fence_all();
        if !self.fenced.swap(true, Ordering::SeqCst) {
            tracing::error!(
                runs,
                "no heartbeat for {}: stopping every run and claiming nothing until the database answers, \
                 so that no other worker runs them while these do",
                crate::text::duration(since)
            );
        }
    }

    /// Look every [`WATCH_EVERY`] until `stop` turns true.
    pub async fn watch(self: Arc<Self>, claims: Arc<Claims>, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.look(&claims),
                _ = stop.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_leaves_a_third_of_the_horizon_or_an_interval_whichever_is_more() {
        let s = Duration::from_secs;
        assert_eq!(Fence::after(s(5), s(30)), s(20));
        assert_eq!(Fence::after(s(1), s(6)), s(4));
        assert_eq!(Fence::after(s(10), s(30)), s(20));
        assert_eq!(Fence::after(s(5), s(12)), s(10), "never under two intervals");
    }

    #[test]
    fn a_fence_stops_every_run_in_flight_once_the_heartbeat_is_late_and_lifts_when_one_succeeds() {
        let fence = Fence { after: Duration::ZERO, ..Fence::new(Duration::from_secs(1), Duration::from_secs(3)) };
        let claims = Arc::new(Claims::default());
        let _held = claims.hold(7).expect("held");
        let stop = claims.start(7);
        fence.look(&claims);
        assert!(fence.is_fenced());
        assert!(claims.fenced(7));
        // The run was told to stop: its notification is waiting.
        assert!(futures::FutureExt::now_or_never(stop.notified()).is_some());
        fence.alive(Instant::now());
        assert!(!fence.is_fenced());
    }
}
