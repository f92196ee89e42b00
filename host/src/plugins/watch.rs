//! Watching the plugins directory for added, replaced or removed files.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Catalog;

/// What the directory looks like: names, sizes and modification times of `*.wasm` and `*.toml`.
fn dir_fingerprint(dir: &Path) -> Vec<(String, u64, Option<std::time::SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wasm" || x == "toml"))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

impl Catalog {
    /// Watch the directory: every `interval`, if any component or manifest was added, replaced
    /// or removed, reload (new runs use the new versions; a broken file keeps the previous
    /// good version). Polling keeps it portable and cheap: one directory listing per interval.
    pub async fn watch(self: Arc<Self>, interval: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut seen = dir_fingerprint(&self.dir);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let now = dir_fingerprint(&self.dir);
            if now == seen {
                continue;
            }
            seen = now;
            self.clone().reload_and_log().await;
        }
    }

    /// Reload every plugin off the async threads, logging whether each can be used.
    pub async fn reload_and_log(self: Arc<Self>) {
        if let Ok(reports) = tokio::task::spawn_blocking(move || self.reload()).await {
            for r in reports {
                match r.status {
                    Ok(()) => tracing::info!(plugin = %r.name, "plugin ready"),
                    Err(e) => tracing::warn!(plugin = %r.name, "plugin unusable: {e}"),
                }
            }
        }
    }
}
