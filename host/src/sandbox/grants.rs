//! Capabilities a handler is granted beyond the default of nothing. Only the operator grants
//! them, in the configuration file (see [`crate::config`]), never a plugin's own manifest:
//!
//! ```toml
//! [handlers.NAME.grants]
//! env = ["API_URL", "LANG"]            # host environment variables passed through, by name
//! [[handlers.NAME.grants.dirs]]
//! host = "/srv/data"                    # absolute, or relative to the configuration file
//! guest = "/data"                       # where the guest sees it
//! mode = "ro"                           # "ro" (default) or "rw"
//! ```
//!
//! Network: outbound HTTP by `[handlers.NAME.grants.http]` (see [`super::net::policy`]), plain
//! TCP and UDP to named hosts and ports by `[handlers.NAME.grants.sockets]` (see
//! [`super::net::socket_grant`]). Without them a guest's attempt fails before any socket exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

/// Where `taskhost dev` lends a run the handler's source (read only), and the Python and
/// JavaScript SDKs look for it: no operator's grant may reach it (nor `/`, under which a guest
/// could make it), so a worker's guest can never put code there for a later run.
pub const DEV_SOURCE: &str = "/taskhost-dev";

/// Whether a guest path is `/`, or at or under [`DEV_SOURCE`], or climbs with `..`.
fn reserved(guest: &str) -> bool {
    use std::path::Component;
    let parts: Vec<Component<'_>> =
        Path::new(guest).components().filter(|c| !matches!(c, Component::RootDir | Component::CurDir)).collect();
    let dev = DEV_SOURCE.trim_start_matches('/');
    parts.is_empty()
        || parts.iter().any(|c| matches!(c, Component::ParentDir))
        || parts.first().is_some_and(|c| c.as_os_str() == dev)
}

/// The `grants` table of a handler in the operator's configuration, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantsConfig {
    /// Environment variables of the host the handler may read.
    #[serde(default)]
    pub env: Vec<String>,
    /// Directories the handler may read (or write).
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Outbound HTTP: where to, and the bounds of each run.
    pub http: Option<super::net::HttpGrantConfig>,
    /// Plain TCP and UDP: to which hosts and ports.
    pub sockets: Option<super::net::SocketGrantConfig>,
}

/// A directory of the host, seen by the guest at a path of its own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The host's directory.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    /// Read only, or read and write.
    #[serde(default)]
    pub mode: DirMode,
}

/// What the guest may do in a granted directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum DirMode {
    /// Read (`ro`, the default).
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read and write (`rw`).
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Grants resolved for use: values of granted variables, absolute directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Variables and their values.
    pub env: Vec<(String, String)>,
    /// Host directory, guest path, mode.
    pub dirs: Vec<(PathBuf, String, DirMode)>,
    /// Outbound HTTP, when granted.
    pub http: Option<Arc<super::net::HttpPolicy>>,
    /// Plain sockets, when granted.
    pub sockets: Option<Arc<super::net::SocketPolicy>>,
    /// Granted variables this host does not set: said when a worker loads the handler, not by
    /// every command that reads the file (one that only queues or reads never hands them over).
    pub unset_env: Vec<String>,
}

/// What a handler is granted, as the API shows it: the names of variables, never their values.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct GrantsSummary {
    /// Variable names.
    pub env: Vec<String>,
    /// `GUEST (ro)` or `GUEST (rw)`; where it is on the host is the operator's business.
    pub dirs: Vec<String>,
    /// HTTP destinations.
    pub http: Vec<String>,
    /// Socket endpoints.
    pub sockets: Vec<String>,
}

impl Grants {
    /// What is granted, for people (no values).
    pub fn summary(&self) -> GrantsSummary {
        let mode = |m: &DirMode| if *m == DirMode::ReadWrite { "rw" } else { "ro" };
        GrantsSummary {
            env: self.env.iter().map(|(name, _)| name.clone()).collect(),
            dirs: self.dirs.iter().map(|(_, guest, m)| format!("{guest} ({})", mode(m))).collect(),
            http: self.http.iter().flat_map(|p| p.destinations.iter().map(|d| d.to_string())).collect(),
            sockets: self.sockets.iter().flat_map(|p| p.endpoints.iter().map(|e| e.to_string())).collect(),
        }
    }
}

impl GrantsConfig {
    /// Read granted variables from this process's environment (now, at load) and resolve
    /// granted directories: `base` resolves relative paths, and each must exist and is
    /// canonicalised (symbolic links resolved once, by the operator's word).
    pub fn resolve(&self, base: &Path) -> Result<Grants, String> {
        let (mut env, mut unset_env) = (Vec::new(), Vec::new());
        for name in &self.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(format!("invalid environment variable name {name:?}"));
            }
            match std::env::var(name) {
                Ok(v) => env.push((name.clone(), v)),
                Err(_) => unset_env.push(name.clone()),
            }
        }
        let mut dirs = Vec::new();
        for d in &self.dirs {
            let host = if d.host.is_absolute() { d.host.clone() } else { base.join(&d.host) };
            let host = std::fs::canonicalize(&host)
                .map_err(|e| format!("granted directory {} cannot be used: {e}", host.display()))?;
            if !host.is_dir() {
                return Err(format!("granted directory {} is not a directory", host.display()));
            }
            if !d.guest.starts_with('/') {
                return Err(format!("guest path {:?} must be absolute", d.guest));
            }
            if reserved(&d.guest) {
                return Err(format!(
                    "guest path {:?} cannot be granted: not `/`, nor `..`, nor {DEV_SOURCE} (where `taskhost dev` lends a handler's source)",
                    d.guest
                ));
            }
            dirs.push((host, d.guest.clone(), d.mode));
        }
        let http = match &self.http {
            None => None,
            Some(h) => Some(Arc::new(h.resolve(base).map_err(|e| format!("http: {e}"))?)),
        };
        let sockets = match &self.sockets {
            None => None,
            Some(s) => Some(Arc::new(s.resolve().map_err(|e| format!("sockets: {e}"))?)),
        };
        Ok(Grants { env, dirs, http, sockets, unset_env })
    }
}

/// Most random bytes a guest gets in one call.
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// The WASI context of one run: only what `grants` lists. Sockets only under a socket grant,
/// each address checked by the run's [`SocketRun`](super::net::SocketRun); without one they
/// cannot even be created, so a guest holds no OS socket.
pub(crate) fn wasi_ctx(
    grants: &Grants,
    output: &super::output::GuestOutput,
    sockets: &Arc<super::net::SocketRun>,
) -> Result<WasiCtx, String> {
    let mut b = WasiCtxBuilder::new();
    b.stdout(output.stdout()).stderr(output.stderr());
    for (k, v) in &grants.env {
        b.env(k, v);
    }
    for (host, guest, mode) in &grants.dirs {
        let perms = match mode {
            DirMode::ReadOnly => FsPerms::ReadOnly,
            DirMode::ReadWrite => FsPerms::ReadWrite,
        };
        b.preopened_dir(host, guest, perms)
            .map_err(|e| format!("cannot open granted directory {}: {e:#}", host.display()))?;
    }
    // Random bytes are copied from the host to the guest: a small bound per call.
    b.max_random_size(MAX_RANDOM_BYTES);
    let (tcp, udp) = match sockets.policy() {
        Some(p) => {
            (p.allows(super::net::socket_grant::Protocol::Tcp), p.allows(super::net::socket_grant::Protocol::Udp))
        }
        None => (false, false),
    };
    let run = sockets.clone();
    b.allow_ip_name_lookup(tcp || udp)
        .allow_tcp(tcp)
        .allow_udp(udp)
        .socket_addr_check(move |addr, used| Box::pin(run.clone().allows(addr, used)));
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_grant_reaches_where_taskhost_dev_lends_a_handlers_source() {
        let base = std::env::temp_dir();
        let grant = |guest: &str| GrantsConfig {
            dirs: vec![DirGrant { host: base.clone(), guest: guest.into(), mode: DirMode::ReadWrite }],
            ..Default::default()
        };
        for guest in ["/", "//", "/.", "/taskhost-dev", "/taskhost-dev/x", "/./taskhost-dev", "/data/../taskhost-dev"] {
            let refused = grant(guest).resolve(&base).expect_err(guest);
            assert!(refused.contains("cannot be granted"), "{guest}: {refused}");
        }
        for guest in ["/data", "/taskhost-devices", "/srv/taskhost-dev"] {
            assert!(grant(guest).resolve(&base).is_ok(), "{guest}");
        }
    }
}
