//! Handlers deployed to the database (see [`crate::plugins`]' `deployed.rs`): the worker's part
//! that reads their active versions (at most a second after a release, by its mark) and loads
//! each before the worker claims its tasks, and the loading of the version a claimed run names.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::model::Failure;
use crate::plugins::{short, Catalog, Plugin};
use crate::sandbox::codes;
use crate::store::SharedStore;

/// How often the newest release's mark is read.
pub(super) const RELEASE_POLL: Duration = Duration::from_secs(1);

/// The part: see the module's documentation.
pub(super) struct Deploys {
    pub store: SharedStore,
    pub catalog: Arc<Catalog>,
    pub interval: Duration,
}

/// What the part remembers between its turns.
#[derive(Default)]
struct Seen {
    /// The release mark last read.
    mark: Option<i64>,
    /// Versions that cannot be used here: not tried again until the next release.
    failed: HashSet<(String, String)>,
    /// Loads under way, each on a task of its own: one slow compile holds up only its handler,
    /// and the mark is read meanwhile.
    loading: HashMap<(String, String), JoinHandle<Result<(), Failure>>>,
}

impl Deploys {
    /// Read and load until `stop` turns true (loads under way are left to finish on their own).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut seen = Seen::default();
        let mut warned = false;
        loop {
            tokio::select! {
                r = self.run_once(&mut seen) => match r {
                    Ok(()) => warned = false,
                    Err(e) if !warned => {
                        tracing::warn!("cannot read the deployed handlers (trying again each second): {e}");
                        warned = true;
                    }
                    Err(_) => {}
                },
                _ = stop.changed() => return,
            }
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One turn: read the active versions when a release was made since the last turn, see to
    /// the loads that ended, and start one for each active version neither loaded, loading nor
    /// refused here.
    async fn run_once(&self, seen: &mut Seen) -> crate::error::Result<()> {
        let ended: Vec<(String, String)> =
            seen.loading.iter().filter(|(_, h)| h.is_finished()).map(|(k, _)| k.clone()).collect();
        for key in ended {
            let Some(handle) = seen.loading.remove(&key) else { continue };
            let failure = match handle.await {
                Ok(Ok(())) => continue,
                Ok(Err(f)) => f,
                Err(e) => Failure::host_error(&format!("plugin loader panicked: {e}")),
            };
            // A database that could not be read is tried again next turn; a version that
            // cannot be used here is not, until the next release.
            tracing::warn!(plugin = %key.0, version = short(&key.1), "deployed version not loaded: {}", failure.message);
            if !failure.retryable {
                seen.failed.insert(key);
            }
        }
        // After the loads that ended are seen to: a failure of a load started before a release
        // read now is forgotten with the others.
        let mark = self.store.release_mark().await?;
        if seen.mark != Some(mark) {
            self.catalog.set_active(self.store.active_versions().await?);
            seen.mark = Some(mark);
            seen.failed.clear();
        }
        let mut left = false;
        for v in self.catalog.to_load() {
            let key = (v.handler.clone(), v.digest.clone());
            if seen.failed.contains(&key) {
                continue;
            }
            left = true;
            if let std::collections::hash_map::Entry::Vacant(e) = seen.loading.entry(key) {
                let (store, catalog) = (self.store.clone(), self.catalog.clone());
                let load = async move { load(&store, &catalog, &v.handler, &v.digest).await.map(drop) };
                e.insert(tokio::spawn(load));
            }
        }
        self.catalog.set_deploys_settled(!left);
        Ok(())
    }
}

/// The plugin of a claimed run of `name` that names the version `digest`: loaded here already,
/// or loaded now.
pub(super) async fn plugin_of(
    store: Option<&SharedStore>,
    catalog: &Arc<Catalog>,
    name: &str,
    digest: &str,
) -> Result<Arc<Plugin>, Failure> {
    if let Some(p) = catalog.version(name, digest) {
        return Ok(p);
    }
    let Some(store) = store else {
        return Err(Failure::handler_broken(name, "this worker reads no database to load a deployed version from"));
    };
    load(store, catalog, name, digest).await
}

/// Load the version `digest` of `name`: from this host's compiled cache when it holds it, else
/// from its bytes in the database; once however many runs ask at once. A database that cannot be
/// read puts the run back (not counted); a version that cannot be used fails it.
async fn load(store: &SharedStore, catalog: &Arc<Catalog>, name: &str, digest: &str) -> Result<Arc<Plugin>, Failure> {
    let turn = catalog.load_turn(name, digest);
    let _turn = turn.lock().await;
    if let Some(p) = catalog.version(name, digest) {
        return Ok(p);
    }
    let failed = |e: crate::error::Error| match e {
        // What the database holds is wrong (over the bound, a piece missing): not worth a retry.
        crate::error::Error::Invalid { .. } | crate::error::Error::CorruptRow { .. } => {
            Failure::handler_broken(name, &format!("version {}: {e}", short(digest)))
        }
        e => {
            let message = format!("cannot read version {} of {name} from the database: {e}", short(digest));
            Failure::host(codes::HOST_BUSY, message, true)
        }
    };
    let not_there = || Failure::handler_broken(name, &format!("version {} is not deployed", short(digest)));
    let version = store.version(name, digest).await.map_err(failed)?.ok_or_else(not_there)?;
    let manifest = version.manifest;
    if catalog.is_compiled(digest) {
        if let Ok(p) = load_blocking(catalog, name, digest, manifest.clone(), None).await? {
            return Ok(p);
        }
    }
    let bytes = store.component(digest, catalog.policy().max_component_bytes).await.map_err(failed)?;
    let bytes = bytes.ok_or_else(not_there)?;
    load_blocking(catalog, name, digest, manifest, Some(bytes))
        .await?
        .map_err(|e| Failure::handler_broken(name, &e.to_string()))
}

/// [`Catalog::load_version`] on a blocking thread.
async fn load_blocking(
    catalog: &Arc<Catalog>,
    name: &str,
    digest: &str,
    manifest: Option<String>,
    bytes: Option<Vec<u8>>,
) -> Result<crate::error::Result<Arc<Plugin>>, Failure> {
    let (catalog, name, digest) = (catalog.clone(), name.to_string(), digest.to_string());
    let load = move || catalog.load_version(&name, &digest, manifest.as_deref(), bytes.as_deref());
    tokio::task::spawn_blocking(load).await.map_err(|e| Failure::host_error(&format!("plugin loader panicked: {e}")))
}
