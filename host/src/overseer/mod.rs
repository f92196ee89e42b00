//! Maintenance services, each in its own file with a `Config` (named default constants), a
//! `run_once(now) -> Report` on an injected clock, and this module's thin loop around it:
//!
//! | service | what it does | default interval |
//! |---|---|---|
//! | [`liveness`] | runners with a stale heartbeat, or a vanished process on this host → `timeout`, with their running runs | 5 s |
//! | [`run_timeout`] | running runs past their task's run timeout → `timeout` | 5 s |
//! | [`retries`] | failed (error/timeout) tasks → their next scheduled run after the backoff, or given up at max retries | 1 s |
//! | [`rotation`] | successful tasks finished more than 30 days ago → deleted with their runs, in batches | 10 min |
//!
//! Workers run the overseer too unless told not to; every service is idempotent (each update
//! is guarded by the state it expects), so several overseers on one database do no harm.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::error::Result;
use crate::store::SharedStore;

pub mod liveness;
pub mod retries;
pub mod rotation;
pub mod run_timeout;

/// Settings of every service.
#[derive(Debug, Clone, Default)]
pub struct OverseerConfig {
    pub liveness: liveness::Config,
    pub run_timeout: run_timeout::Config,
    pub retries: retries::Config,
    pub rotation: rotation::Config,
}

/// A service as the loop sees it.
#[async_trait]
pub trait Service: Send + Sync {
    fn name(&self) -> &'static str;
    fn interval(&self) -> Duration;
    /// Run once; a one-line summary of what was done, or None when there was nothing to do.
    async fn tick(&self, now: DateTime<Utc>) -> Result<Option<String>>;
}

pub struct Overseer {
    services: Vec<Arc<dyn Service>>,
    clock: SharedClock,
}

impl Overseer {
    pub fn new(store: SharedStore, clock: SharedClock, config: OverseerConfig) -> Self {
        let services: Vec<Arc<dyn Service>> = vec![
            Arc::new(liveness::Liveness::new(store.clone(), config.liveness)),
            Arc::new(run_timeout::RunTimeout::new(store.clone(), config.run_timeout)),
            Arc::new(retries::Retries::new(store.clone(), config.retries)),
            Arc::new(rotation::Rotation::new(store, config.rotation)),
        ];
        Overseer { services, clock }
    }

    /// Run every service once, in order; for `taskhost overseer --once` and tests.
    pub async fn run_all_once(&self) -> Result<Vec<(String, Option<String>)>> {
        let mut out = Vec::new();
        for s in &self.services {
            out.push((s.name().to_string(), s.tick(self.clock.now()).await?));
        }
        Ok(out)
    }

    /// Run each service on its interval until `stop` turns true.
    pub async fn run_until(self, stop: watch::Receiver<bool>) {
        let loops = self.services.into_iter().map(|s| {
            let clock = self.clock.clone();
            let mut stop = stop.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(s.interval());
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stop.changed() => return,
                    }
                    if *stop.borrow() {
                        return;
                    }
                    match s.tick(clock.now()).await {
                        Ok(Some(summary)) => tracing::info!(service = s.name(), "{summary}"),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(service = s.name(), "failed: {e}"),
                    }
                }
            })
        });
        for l in loops.collect::<Vec<_>>() {
            let _ = l.await;
        }
    }
}
