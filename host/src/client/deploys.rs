//! Deploys, versions and rollbacks of handlers kept in the database (see
//! [`crate::store::components`]).

use super::Client;
use crate::error::{Error, Result};
use crate::plugins::publish::ToDeploy;
use crate::store::components::{Deployed, HandlerVersion, NewVersion, Release};

/// Most releases listed.
const MAX_RELEASES_LISTED: u32 = 1000;

impl Client {
    /// Each pinned task's version as its whole digest: the version of its handler that its
    /// digest (or the start of it) names; refused when none or several do. [`Client::add_many`]
    /// does it; a caller that writes tasks itself (`add_tasks_in`) does it after
    /// [`Client::validate`] (the store refuses a digest's start).
    pub async fn pin_versions(&self, tasks: &mut [crate::model::NewTask]) -> Result<()> {
        let mut known: std::collections::HashMap<String, Vec<String>> = Default::default();
        for t in tasks.iter_mut() {
            let Some(asked) = t.version.clone() else { continue };
            if !known.contains_key(&t.handler) {
                known.insert(t.handler.clone(), self.store.version_digests(&t.handler).await?);
            }
            let digests = known.get(&t.handler).map(Vec::as_slice).unwrap_or_default();
            let matching: Vec<&String> = digests.iter().filter(|d| d.starts_with(&asked)).collect();
            let no = |reason: String| Error::NoVersion { handler: t.handler.clone(), reason };
            if digests.is_empty() {
                // (A file in a plugins directory has no versions to pin.)
                return Err(no("no version of it is deployed: `taskhost deploy` one first".into()));
            }
            t.version = Some(match matching.as_slice() {
                [one] => (*one).clone(),
                [] => return Err(no(format!("no version {asked}: see `taskhost versions {}`", t.handler))),
                more => return Err(no(format!("{asked} names {} versions: give more of it", more.len()))),
            });
        }
        Ok(())
    }

    /// Store `component` (checked by [`crate::plugins::Catalog::check_to_deploy`]) as a version
    /// of its handler and make it active, for every worker within a second; `by` says who.
    pub async fn deploy(&self, component: &ToDeploy, by: &str) -> Result<Deployed> {
        let version = NewVersion {
            handler: &component.name,
            bytes: &component.bytes,
            digest: &component.digest,
            manifest: component.manifest.as_deref(),
            by: &crate::text::bounded(by, 255, "…"),
        };
        let deployed = self.store.deploy(&version, self.clock.now()).await?;
        self.catalog.note_deployed(&component.name);
        Ok(deployed)
    }

    /// A handler's versions, the newest deployed first; refused for a handler never deployed.
    pub async fn versions(&self, handler: &str) -> Result<Vec<HandlerVersion>> {
        let versions = self.store.versions(handler).await?;
        if versions.is_empty() {
            let reason = "nothing deployed by that name: see `taskhost deploy`".to_string();
            return Err(Error::NoVersion { handler: handler.to_string(), reason });
        }
        Ok(versions)
    }

    /// A handler's releases (deploys and rollbacks), the newest first, at most `limit`.
    pub async fn releases(&self, handler: &str, limit: u32) -> Result<Vec<Release>> {
        self.store.releases(handler, limit.clamp(1, MAX_RELEASES_LISTED)).await
    }

    /// Make an earlier version of `handler` active: `to` (a digest or a prefix naming one
    /// version), or the one active before. `by` says who.
    pub async fn rollback(&self, handler: &str, to: Option<&str>, by: &str) -> Result<Release> {
        let by = crate::text::bounded(by, 255, "…");
        let to = to.map(crate::model::version_text);
        self.store.rollback(handler, to.as_deref(), &by, self.clock.now()).await
    }
}
