//! Which requests a grant's destination allows: its scheme, host pattern, port, methods, path
//! prefix and addresses, and the parsing of the names and authorities they are matched against.

use super::addr::IpNet;
use super::policy::DestinationConfig;

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

impl Destination {
    pub(super) fn parse(config: &DestinationConfig) -> Result<Destination, String> {
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
