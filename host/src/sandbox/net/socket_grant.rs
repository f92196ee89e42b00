//! The operator's socket grant of one handler: plain TCP connections and UDP datagrams to the
//! hosts and ports it names, for what is not HTTP (a database, a cache, statsd):
//!
//! ```toml
//! [handlers.reporter.grants.sockets]
//! allow = [
//!     "tcp://192.0.2.10:6379",                                        # an address: reachable as named
//!     { url = "tcp://db.internal:5432", addresses = ["10.0.0.0/8"] }, # a name, and where it may point
//!     "udp://metrics.example.com:8125",
//! ]
//! max_sockets = 16   # per run: sockets created plus names looked up
//! ```
//!
//! A host is an IP literal or one exact name (no wildcard: an address cannot be traced back to a
//! name under a suffix). A guest may look up only the names granted; it may connect to (TCP) or
//! send to (UDP) an address only at a granted port, and only if the address is the granted IP
//! or one the granted name resolves to, as the host resolves it (once per run, kept), and
//! public unless the grant's `addresses` hold it. Listening is never granted; a UDP socket may
//! bind only to an unspecified address and port 0, to send.

use serde::Deserialize;

use super::addr::IpNet;
use super::policy::HostPattern;

/// `[handlers.NAME.grants.sockets]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketGrantConfig {
    /// Where sockets may connect.
    pub allow: Vec<EndpointConfig>,
    /// Sockets and lookups a run may make.
    pub max_sockets: Option<u32>,
}

/// One allowed endpoint: a URL alone, or a table with the addresses its name may resolve to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum EndpointConfig {
    /// A `tcp://` or `udp://` URL.
    Url(String),
    /// A URL with more to say.
    Table {
        /// The URL.
        url: String,
        /// Addresses it may resolve to besides public ones.
        #[serde(default)]
        addresses: Vec<String>,
    },
}

/// A socket's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    /// As written in a grant.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }
}

/// A checked socket grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketPolicy {
    /// Where sockets may connect.
    pub endpoints: Vec<Endpoint>,
    /// Sockets and lookups a run may make.
    pub max_sockets: u32,
}

/// As an operator would read it: `tcp db.internal:5432`.
impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}:{}", self.protocol.as_str(), self.host, self.port)
    }
}

/// One place a socket may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its protocol.
    pub protocol: Protocol,
    /// An IP literal or an exact name, never a wildcard.
    pub host: HostPattern,
    /// Its port.
    pub port: u16,
    /// Non-public addresses the name may resolve to.
    pub addresses: Vec<IpNet>,
}

impl SocketPolicy {
    /// Sockets a grant allows when it says nothing.
    pub const DEFAULT_MAX_SOCKETS: u32 = 16;
    const MAX_SOCKETS: u32 = 1024;

    /// Whether any endpoint is of `protocol`.
    pub fn allows(&self, protocol: Protocol) -> bool {
        self.endpoints.iter().any(|e| e.protocol == protocol)
    }

    /// Whether `name` is a granted name (compared in lower case, without a trailing dot).
    pub fn names(&self, name: &str) -> bool {
        let name = super::policy::normal_name(name);
        self.endpoints.iter().any(|e| matches!(&e.host, HostPattern::Name(n) if Some(n) == name.as_ref()))
    }
}

impl SocketGrantConfig {
    /// Check the grant; one line naming what is wrong otherwise.
    pub fn resolve(&self) -> Result<SocketPolicy, String> {
        let endpoints = self.allow.iter().map(Endpoint::parse).collect::<Result<Vec<_>, _>>()?;
        let max_sockets = self.max_sockets.unwrap_or(SocketPolicy::DEFAULT_MAX_SOCKETS);
        if max_sockets == 0 || max_sockets > SocketPolicy::MAX_SOCKETS {
            return Err(format!("max_sockets = {max_sockets} is out of range (1 to {})", SocketPolicy::MAX_SOCKETS));
        }
        Ok(SocketPolicy { endpoints, max_sockets })
    }
}

impl Endpoint {
    fn parse(config: &EndpointConfig) -> Result<Endpoint, String> {
        let (url, addresses) = match config {
            EndpointConfig::Url(url) => (url, &[][..]),
            EndpointConfig::Table { url, addresses } => (url, &addresses[..]),
        };
        let bad = |why: &str| format!("allow: {url:?} {why}");
        let (scheme, authority) =
            url.split_once("://").ok_or_else(|| bad("is not tcp://host:port or udp://host:port"))?;
        let protocol = match scheme.to_ascii_lowercase().as_str() {
            "tcp" => Protocol::Tcp,
            "udp" => Protocol::Udp,
            _ => return Err(bad("has a scheme other than tcp or udp")),
        };
        let (host, port) = super::policy::split_host_port(authority)
            .filter(|_| !authority.contains(['/', '@', '?', '#']))
            .ok_or_else(|| bad("has no valid host and port"))?;
        let port = port.ok_or_else(|| bad("has no port"))?;
        let host = HostPattern::parse(host).map_err(bad)?;
        if matches!(host, HostPattern::Under(_)) {
            return Err(bad("has a wildcard: a socket grant names each host"));
        }
        let addresses = addresses.iter().map(|a| a.parse::<IpNet>().map_err(|e| bad(&e))).collect::<Result<_, _>>()?;
        Ok(Endpoint { protocol, host, port, addresses })
    }

    /// Whether a connection to `ip` is allowed here, given the addresses this endpoint's name
    /// resolved to (for a name).
    pub fn allows_address(&self, ip: std::net::IpAddr, resolved: &[std::net::IpAddr]) -> bool {
        match &self.host {
            HostPattern::Ip(named) => *named == ip,
            _ => {
                resolved.contains(&ip) && (self.addresses.iter().any(|n| n.contains(ip)) || super::addr::is_public(ip))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> Result<SocketPolicy, String> {
        SocketGrantConfig {
            allow: allow.iter().map(|s| EndpointConfig::Url(s.to_string())).collect(),
            max_sockets: None,
        }
        .resolve()
    }

    #[test]
    fn a_socket_grant_names_protocol_host_and_port() {
        let p = policy(&["tcp://DB.internal.:5432", "udp://192.0.2.1:53", "tcp://[::1]:80"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.endpoints[0].host, HostPattern::Name("db.internal".into()));
        assert_eq!((p.endpoints[1].protocol, p.endpoints[1].port), (Protocol::Udp, 53));
        assert!(p.names("db.internal") && p.names("DB.INTERNAL.") && !p.names("other.internal"));
        assert!(p.allows(Protocol::Tcp) && p.allows(Protocol::Udp));
        assert_eq!(p.max_sockets, SocketPolicy::DEFAULT_MAX_SOCKETS);
    }

    #[test]
    fn a_bad_socket_grant_is_one_line_naming_the_entry() {
        for (entry, says) in [
            ("db.internal:5432", "is not tcp://host:port"),
            ("http://db:80", "scheme other than tcp or udp"),
            ("tcp://db.internal", "has no port"),
            ("tcp://*.internal.example:5432", "has a wildcard"),
            ("tcp://db:5432/path", "no valid host and port"),
            ("tcp://user@db:5432", "no valid host and port"),
        ] {
            let e = policy(&[entry]).err().unwrap_or_else(|| panic!("{entry} must be refused"));
            assert!(e.contains(says) && e.contains(entry), "{entry}: {e}");
        }
        let zero = SocketGrantConfig { allow: vec![], max_sockets: Some(0) }.resolve();
        assert!(zero.is_err_and(|e| e.contains("max_sockets = 0")));
    }

    #[test]
    fn a_name_reaches_only_what_it_resolved_to_and_private_addresses_only_when_listed() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap_or_else(|_| panic!("{s}"));
        let open =
            Endpoint::parse(&EndpointConfig::Url("tcp://db.example:5432".into())).unwrap_or_else(|e| panic!("{e}"));
        assert!(open.allows_address(ip("8.8.8.8"), &[ip("8.8.8.8")]));
        assert!(!open.allows_address(ip("8.8.4.4"), &[ip("8.8.8.8")]), "not what the name resolved to");
        assert!(!open.allows_address(ip("127.0.0.1"), &[ip("127.0.0.1")]), "loopback only when listed");
        let listed = Endpoint::parse(&EndpointConfig::Table {
            url: "tcp://db.example:5432".into(),
            addresses: vec!["127.0.0.0/8".into()],
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(listed.allows_address(ip("127.0.0.1"), &[ip("127.0.0.1")]));
        let literal =
            Endpoint::parse(&EndpointConfig::Url("tcp://10.0.0.5:6379".into())).unwrap_or_else(|e| panic!("{e}"));
        assert!(literal.allows_address(ip("10.0.0.5"), &[]) && !literal.allows_address(ip("10.0.0.6"), &[]));
    }
}
