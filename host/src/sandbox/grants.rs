//! Capabilities a handler is granted beyond the default of nothing, from its manifest:
//!
//! ```toml
//! [grants]
//! env = ["API_URL", "LANG"]            # host environment variables passed through, by name
//! [[grants.dirs]]
//! host = "data"                         # relative to the plugins directory, or absolute
//! guest = "/data"                       # where the guest sees it
//! mode = "ro"                           # "ro" (default) or "rw"
//! ```
//!
//! Network: no socket address is ever allowed and name lookup is off; attempts are noted in
//! the run's logs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

/// The `[grants]` table of a manifest, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantsManifest {
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub dirs: Vec<DirManifest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirManifest {
    pub host: PathBuf,
    pub guest: String,
    #[serde(default)]
    pub mode: DirMode,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum DirMode {
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Grants resolved for use: values of granted variables, absolute directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    pub env: Vec<(String, String)>,
    pub dirs: Vec<(PathBuf, String, DirMode)>,
}

impl GrantsManifest {
    /// Read granted variables from this process's environment (now, at load) and check that
    /// granted directories exist. `base` resolves relative directory paths.
    pub fn resolve(&self, base: &Path) -> Result<Grants, String> {
        let mut env = Vec::new();
        for name in &self.env {
            if name.is_empty() || name.contains('=') {
                return Err(format!("invalid environment variable name {name:?}"));
            }
            match std::env::var(name) {
                Ok(v) => env.push((name.clone(), v)),
                Err(_) => tracing::warn!(variable = %name, "granted environment variable is not set on this host"),
            }
        }
        let mut dirs = Vec::new();
        for d in &self.dirs {
            let host = if d.host.is_absolute() { d.host.clone() } else { base.join(&d.host) };
            if !host.is_dir() {
                return Err(format!("granted directory {} does not exist", host.display()));
            }
            if !d.guest.starts_with('/') {
                return Err(format!("guest path {:?} must be absolute", d.guest));
            }
            dirs.push((host, d.guest.clone(), d.mode));
        }
        Ok(Grants { env, dirs })
    }
}

/// Network attempts a guest made, all refused.
pub type DeniedSockets = Arc<Mutex<Vec<String>>>;

/// The WASI context of one run: only what `grants` lists.
pub(crate) fn wasi_ctx(grants: &Grants, denied: &DeniedSockets) -> Result<WasiCtx, String> {
    let mut b = WasiCtxBuilder::new();
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
    let denied = denied.clone();
    // TCP and UDP are "allowed" only so that every attempt reaches the address check below,
    // which refuses it and notes it for the run's logs.
    b.allow_ip_name_lookup(false).allow_tcp(true).allow_udp(true).socket_addr_check(
        move |addr: SocketAddr, usage: SocketAddrUse| {
            if let Ok(mut d) = denied.lock() {
                if d.len() < 16 {
                    d.push(format!("{usage:?} {addr}"));
                }
            }
            Box::pin(async { false })
        },
    );
    Ok(b.build())
}
