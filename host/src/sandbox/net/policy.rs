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

use super::addr::IpNet;

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

/// A URL's scheme a grant names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// As written in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub(super) fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// How a destination names its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// One name, lower case, without a trailing dot.
    Name(String),
    /// `*.SUFFIX`: any name ending in `.SUFFIX`.
    Under(String),
    /// An IP literal: the grant names this address, so it may be reached whatever it is.
    Ip(std::net::IpAddr),
}

impl HostPattern {
    /// A host as a grant writes it: an IP literal, a name, or `*.` and a name with a dot.
    pub fn parse(host: &str) -> Result<HostPattern, &'static str> {
        if let Some(ip) = parse_ip_host(host) {
            return Ok(HostPattern::Ip(ip));
        }
        let (wild, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if name.contains('*') {
            return Err("may hold `*` only as its whole first label, as in *.example.com");
        }
        let name = normal_name(name).ok_or("has an invalid host name")?;
        match (wild, name.contains('.')) {
            (true, true) => Ok(HostPattern::Under(name)),
            (true, false) => Err("has a wildcard too wide: write *.example.com"),
            (false, _) => Ok(HostPattern::Name(name)),
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Name(n) => f.write_str(n),
            HostPattern::Under(n) => write!(f, "*.{n}"),
            HostPattern::Ip(std::net::IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostPattern::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// Where a grant lets requests go: a scheme, a host (or a pattern of hosts) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Its scheme.
    pub scheme: Scheme,
    /// Its host, or pattern of hosts.
    pub host: HostPattern,
    /// Its port.
    pub port: u16,
    /// Upper case; empty: any method.
    pub methods: Vec<String>,
    /// Empty: any path.
    pub path_prefix: String,
    /// Non-public addresses this destination's name may resolve to.
    pub addresses: Vec<IpNet>,
}

/// As an operator would read it: `https://api.example.com:443/v1/ (GET, POST)`.
impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}{}", self.scheme.as_str(), self.host, self.port, self.path_prefix)?;
        if self.path_prefix.is_empty() {
            f.write_str("/*")?;
        }
        if !self.methods.is_empty() {
            write!(f, " ({})", self.methods.join(", "))?;
        }
        Ok(())
    }
}

/// A request as the policy sees it: its host already checked to be a plain host (no userinfo).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The request's scheme.
    pub scheme: Scheme,
    /// Its host.
    pub host: &'a str,
    /// Its port.
    pub port: u16,
    /// Its method.
    pub method: &'a str,
    /// Its path.
    pub path: &'a str,
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

impl Destination {
    fn parse(config: &DestinationConfig) -> Result<Destination, String> {
        let (url, methods, addresses) = match config {
            DestinationConfig::Url(url) => (url, &[][..], &[][..]),
            DestinationConfig::Table { url, methods, addresses } => (url, &methods[..], &addresses[..]),
        };
        let bad = |why: &str| format!("allow: {url:?} {why}");
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("is not scheme://host[:port][/path]"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return Err(bad("has a scheme other than http or https")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') || rest.contains(['?', '#']) {
            return Err(bad("may hold no user, query or fragment"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| bad("has no valid host and port"))?;
        let port = port.unwrap_or(scheme.default_port());
        let host = HostPattern::parse(host).map_err(bad)?;
        let methods = methods
            .iter()
            .map(|m| {
                let up = m.to_ascii_uppercase();
                http::Method::from_bytes(up.as_bytes())
                    .map(|_| up)
                    .map_err(|_| bad(&format!("method {m:?} is invalid")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let addresses = addresses.iter().map(|a| a.parse::<IpNet>().map_err(|e| bad(&e))).collect::<Result<_, _>>()?;
        let path_prefix = if path == "/" { String::new() } else { path.to_string() };
        Ok(Destination { scheme, host, port, methods, path_prefix, addresses })
    }

    /// Whether this destination allows `t` (its host compared in lower case).
    pub fn allows_endpoint(&self, t: &Target<'_>) -> bool {
        if self.scheme != t.scheme || self.port != t.port {
            return false;
        }
        match &self.host {
            HostPattern::Ip(ip) => parse_ip_host(t.host) == Some(*ip),
            HostPattern::Name(n) => normal_name(t.host).is_some_and(|h| &h == n),
            HostPattern::Under(suffix) => normal_name(t.host).is_some_and(|h| {
                h.len() > suffix.len() + 1 && h.ends_with(suffix.as_str()) && h[..h.len() - suffix.len()].ends_with('.')
            }),
        }
    }

    /// Any method but CONNECT and TRACE when none are listed; those two only when listed.
    pub fn allows_method(&self, method: &str) -> bool {
        if self.methods.is_empty() {
            return !matches!(method, "CONNECT" | "TRACE");
        }
        self.methods.iter().any(|m| m == method)
    }

    /// Within the prefix, on a segment boundary (`/v1` allows `/v1` and `/v1/x`, not `/v1-admin`).
    pub fn allows_path(&self, path: &str) -> bool {
        if self.path_prefix.is_empty() {
            return true;
        }
        let Some(rest) = path.strip_prefix(self.path_prefix.as_str()) else { return false };
        let boundary = self.path_prefix.ends_with('/') || rest.is_empty() || rest.starts_with(['/', '?']);
        boundary && !escapes(path)
    }

    /// Whether a connection to `ip` is allowed for this destination.
    pub fn allows_address(&self, ip: std::net::IpAddr) -> bool {
        matches!(self.host, HostPattern::Ip(named) if named == ip)
            || self.addresses.iter().any(|n| n.contains(ip))
            || super::addr::is_public(ip)
    }
}

/// A path a server may resolve outside a prefix: dot segments, any percent-encoding (`%2e`,
/// `%2f`, `%5c`, double encodings), `;` parameters (`..;/` on some servers), backslashes.
fn escapes(path: &str) -> bool {
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.split('/').any(|seg| seg == "." || seg == "..") || path.contains(['%', ';', '\\'])
}

/// `host[:port]` or `[v6][:port]`.
pub fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        (&authority[..end + 2], if after.is_empty() { None } else { Some(after.strip_prefix(':')?) })
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p != 0 && !p.to_string().is_empty())?),
    };
    Some((host, port))
}

/// An IP literal host: `127.0.0.1` or `[::1]`.
pub fn parse_ip_host(host: &str) -> Option<std::net::IpAddr> {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6),
        None => host.parse::<std::net::Ipv4Addr>().ok().map(std::net::IpAddr::V4),
    }
}

/// A host name in lower case without its trailing dot, if it is one: letters, digits, `-`, `_`
/// and `.`.
pub fn normal_name(host: &str) -> Option<String> {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then_some(host)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
