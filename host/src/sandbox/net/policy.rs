//! The operator's HTTP grant of one handler, as written in the configuration file and as used:
//!
//! ```toml
//! [handlers.webhook.grants.http]
//! allow = [
//!     "https://hooks.example.com/v1/",                  # scheme://host[:port][/path-prefix]
//!     { url = "https://*.example.org", methods = ["GET", "HEAD"] },
//!     { url = "http://mail.internal:8025", addresses = ["10.0.0.0/8"] },
//! ]
//! max_requests = 100          # per run
//! max_concurrent = 8          # per run, in flight at once
//! max_request_bytes = 1048576
//! max_response_bytes = 16777216
//! connect_timeout = "10s"     # name lookup, TCP and TLS; each timeout also ends at the run's deadline
//! first_byte_timeout = "30s"  # from the request sent on its connection to the response's head
//! between_bytes_timeout = "30s"
//! ca_file = "internal-ca.pem" # extra trusted roots (PEM), besides the public ones
//! ```
//!
//! A destination matches a request when scheme, host and port are equal (a port left out is the
//! scheme's: 80 or 443; `*.example.org` is any name under example.org, not example.org itself),
//! the method is listed (any method when `methods` is left out) and the path starts with the
//! destination's path (when it has one: then a path with `.`/`..` segments or an encoded `.` or
//! `/` is refused, since a server may resolve it outside the prefix).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub use super::destination::*;

/// `[handlers.NAME.grants.http]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpGrantConfig {
    /// Where requests may go.
    pub allow: Vec<DestinationConfig>,
    /// Requests a run may make.
    pub max_requests: Option<u32>,
    /// Requests a run may have open at once.
    pub max_concurrent: Option<u32>,
    /// Bytes of one request's body.
    pub max_request_bytes: Option<u64>,
    /// Bytes of one response's body.
    pub max_response_bytes: Option<u64>,
    /// Longest a connection may take ("5s").
    #[serde(default, deserialize_with = "crate::sandbox::limits::duration_opt")]
    pub connect_timeout: Option<Duration>,
    /// Longest the first byte of a response may take.
    #[serde(default, deserialize_with = "crate::sandbox::limits::duration_opt")]
    pub first_byte_timeout: Option<Duration>,
    /// Longest a pause between bytes may be.
    #[serde(default, deserialize_with = "crate::sandbox::limits::duration_opt")]
    pub between_bytes_timeout: Option<Duration>,
    /// More roots to trust, in a PEM file (besides the system's).
    pub ca_file: Option<std::path::PathBuf>,
}

/// One allowed destination: a URL alone, or a table with what else it allows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum DestinationConfig {
    /// A URL: any method.
    Url(String),
    /// A URL with more to say.
    Table {
        /// The URL (scheme, host or `*.` pattern, port).
        url: String,
        /// The methods allowed (none: any).
        #[serde(default)]
        methods: Vec<String>,
        /// Addresses it may resolve to besides public ones (e.g. `10.0.0.0/8`).
        #[serde(default)]
        addresses: Vec<String>,
    },
}

/// A checked HTTP grant: where a handler's requests may go, and the bounds of each run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPolicy {
    /// Where requests may go.
    pub destinations: Vec<Destination>,
    /// How much and how long.
    pub bounds: HttpBounds,
    /// Extra trusted roots from `ca_file`, read and checked when the configuration was loaded.
    pub roots: Option<ExtraRoots>,
}

/// The grant's own roots (DER) and the TLS settings trusting them, built once.
#[derive(Clone)]
pub struct ExtraRoots {
    /// The certificates, DER-encoded.
    pub der: Vec<Vec<u8>>,
    pub(super) config: std::sync::Arc<tokio_rustls::rustls::ClientConfig>,
}

impl PartialEq for ExtraRoots {
    fn eq(&self, other: &Self) -> bool {
        self.der == other.der
    }
}

impl Eq for ExtraRoots {}

impl std::fmt::Debug for ExtraRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExtraRoots({} certificates)", self.der.len())
    }
}

/// What one run may do over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpBounds {
    /// Requests a run may make.
    pub max_requests: u32,
    /// Requests open at once.
    pub max_concurrent: u32,
    /// Bytes of one request's body.
    pub max_request_bytes: u64,
    /// Bytes of one response's body.
    pub max_response_bytes: u64,
    /// Longest a connection may take.
    pub connect_timeout: Duration,
    /// Longest the first byte of a response may take.
    pub first_byte_timeout: Duration,
    /// Longest a pause between bytes of a response may be.
    pub between_bytes_timeout: Duration,
}

impl HttpBounds {
    /// The bounds of a grant that sets none.
    pub const DEFAULT: HttpBounds = HttpBounds {
        max_requests: 100,
        max_concurrent: 8,
        max_request_bytes: 1 << 20,
        max_response_bytes: 16 << 20,
        connect_timeout: Duration::from_secs(10),
        first_byte_timeout: Duration::from_secs(30),
        between_bytes_timeout: Duration::from_secs(30),
    };
    const MAX_REQUESTS: u32 = 100_000;
    const MAX_CONCURRENT: u32 = 256;
    const MAX_BYTES: u64 = 1 << 30;
}

impl HttpGrantConfig {
    /// Check every destination and bound; `base` resolves a relative `ca_file`.
    pub fn resolve(&self, base: &Path) -> Result<HttpPolicy, String> {
        let destinations = self.allow.iter().map(Destination::parse).collect::<Result<Vec<_>, _>>()?;
        let d = HttpBounds::DEFAULT;
        let bounds = HttpBounds {
            max_requests: self.max_requests.unwrap_or(d.max_requests),
            max_concurrent: self.max_concurrent.unwrap_or(d.max_concurrent),
            max_request_bytes: self.max_request_bytes.unwrap_or(d.max_request_bytes),
            max_response_bytes: self.max_response_bytes.unwrap_or(d.max_response_bytes),
            connect_timeout: self.connect_timeout.unwrap_or(d.connect_timeout),
            first_byte_timeout: self.first_byte_timeout.unwrap_or(d.first_byte_timeout),
            between_bytes_timeout: self.between_bytes_timeout.unwrap_or(d.between_bytes_timeout),
        };
        let in_range = |name: &str, v: u64, hi: u64| {
            if v == 0 || v > hi {
                Err(format!("{name} = {v} is out of range (1 to {hi})"))
            } else {
                Ok(())
            }
        };
        in_range("max_requests", bounds.max_requests.into(), HttpBounds::MAX_REQUESTS.into())?;
        in_range("max_concurrent", bounds.max_concurrent.into(), HttpBounds::MAX_CONCURRENT.into())?;
        in_range("max_request_bytes", bounds.max_request_bytes, HttpBounds::MAX_BYTES)?;
        in_range("max_response_bytes", bounds.max_response_bytes, HttpBounds::MAX_BYTES)?;
        for (name, t) in [
            ("connect_timeout", bounds.connect_timeout),
            ("first_byte_timeout", bounds.first_byte_timeout),
            ("between_bytes_timeout", bounds.between_bytes_timeout),
        ] {
            if t < Duration::from_millis(1) || t > crate::sandbox::Limits::MAX_DEADLINE {
                return Err(format!("{name} = {t:?} is out of range (1ms to 24h)"));
            }
        }
        let roots = match &self.ca_file {
            None => None,
            Some(p) => {
                let der = read_pem_certificates(&if p.is_absolute() { p.clone() } else { base.join(p) })?;
                let config = super::dial::client_config(&der).map_err(|e| format!("ca_file: {e}"))?;
                Some(ExtraRoots { der, config })
            }
        };
        Ok(HttpPolicy { destinations, bounds, roots })
    }
}

fn read_pem_certificates(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::CertificateDer;
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("ca_file {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("ca_file {}: no PEM certificate in it", path.display()));
    }
    Ok(certs.into_iter().map(|c| c.as_ref().to_vec()).collect())
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
