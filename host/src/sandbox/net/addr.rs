//! Which IP addresses a request may reach. A destination's name is resolved by the host and every
//! address checked before a connection is made; the connection goes to a checked address, so a
//! name cannot change its answer between the check and the connect (DNS rebinding).
//!
//! Public unicast addresses are allowed. Everything else (loopback, private, link-local and
//! cloud metadata, shared, documentation, multicast, reserved, and their IPv6 counterparts and
//! IPv4 forms embedded in IPv6) is refused unless the grant names it: as the destination's own
//! IP literal, or in its `addresses` list.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address block, `10.0.0.0/8` or `fd00::/8`; a bare address is a block of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Whether `ip` is in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.prefix),
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let written = IpAddr::from_str(addr).map_err(|_| format!("{s:?} is not an IP address or block"))?;
        let addr = canonical(written);
        if addr != written && prefix.is_some() {
            return Err(format!("{s:?}: an IPv4 block written in IPv6: write it as IPv4"));
        }
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(|| format!("{s:?}: bad prefix length"))?,
        };
        Ok(IpNet { addr, prefix })
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

/// An IPv4 address carried in IPv6 (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4
/// `2002:AABB:CCDD::`) is judged as that IPv4 address: each reaches it.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let o = v6.octets();
    if o[..12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] {
        return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if o[..2] == [0x20, 0x02] {
        return IpAddr::V4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    ip
}

/// Whether `ip` is a public unicast address, reachable without the grant naming it.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    const BLOCKED: [([u8; 4], u8); 17] = [
        ([0, 0, 0, 0], 8),        // "this network"
        ([10, 0, 0, 0], 8),       // private
        ([100, 64, 0, 0], 10),    // shared address space (carrier-grade NAT)
        ([127, 0, 0, 0], 8),      // loopback
        ([169, 254, 0, 0], 16),   // link-local, cloud metadata (169.254.169.254)
        ([172, 16, 0, 0], 12),    // private
        ([192, 0, 0, 0], 24),     // IETF protocol assignments
        ([192, 0, 2, 0], 24),     // documentation
        ([192, 88, 99, 0], 24),   // 6to4 relay anycast
        ([192, 168, 0, 0], 16),   // private
        ([168, 63, 129, 16], 32), // Azure's platform endpoint, reachable from its VMs
        ([198, 18, 0, 0], 15),    // benchmarking
        ([198, 51, 100, 0], 24),  // documentation
        ([203, 0, 113, 0], 24),   // documentation
        ([224, 0, 0, 0], 4),      // multicast
        ([240, 0, 0, 0], 4),      // reserved, broadcast
        ([255, 255, 255, 255], 32),
    ];
    !BLOCKED.iter().any(|(net, bits)| prefix_eq(net, &ip.octets(), *bits))
}

fn public_v6(ip: Ipv6Addr) -> bool {
    const BLOCKED: [([u8; 4], u8); 7] = [
        ([0, 0, 0, 0], 8),              // unspecified, loopback, IPv4-compatible and other reserved
        ([0x01, 0, 0, 0], 16),          // discard-only (100::/64) and reserved
        ([0x20, 0x01, 0x0d, 0xb8], 32), // documentation
        ([0x20, 0x01, 0, 0], 23),       // IETF protocol assignments (Teredo, benchmarking, ...)
        ([0xfc, 0, 0, 0], 7),           // unique local (cloud metadata fd00:ec2::254 among them)
        ([0xfe, 0x80, 0, 0], 10),       // link-local
        ([0xff, 0, 0, 0], 8),           // multicast
    ];
    let o = ip.octets();
    // Site-local (deprecated, fec0::/10) is refused with link-local's neighbours.
    let site_local = o[0] == 0xfe && o[1] & 0xc0 == 0xc0;
    !site_local && !BLOCKED.iter().any(|(net, bits)| prefix_eq(net, &o[..4], *bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s} is not an address"))
    }

    #[test]
    fn loopback_private_link_local_and_metadata_addresses_are_not_public() {
        for s in [
            "127.0.0.1",
            "127.0.0.2",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2001:db8::1",
            "168.63.129.16",
        ] {
            assert!(!is_public(ip(s)), "{s} must not be public");
        }
    }

    #[test]
    fn ordinary_internet_addresses_are_public() {
        for s in ["93.184.215.14", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(ip(s)), "{s} must be public");
        }
    }

    #[test]
    fn address_blocks_parse_and_contain_their_addresses() {
        let net: IpNet = "10.0.0.0/8".parse().unwrap_or(IpNet { addr: ip("0.0.0.0"), prefix: 32 });
        assert!(net.contains(ip("10.200.3.4")));
        assert!(!net.contains(ip("11.0.0.1")));
        assert!(net.contains(ip("::ffff:10.0.0.1")), "a mapped address is its IPv4 address");
        let one: IpNet = "127.0.0.2".parse().unwrap_or(IpNet { addr: ip("0.0.0.0"), prefix: 0 });
        assert!(one.contains(ip("127.0.0.2")) && !one.contains(ip("127.0.0.1")));
        let v6: IpNet = "fd00::/8".parse().unwrap_or(IpNet { addr: ip("0.0.0.0"), prefix: 32 });
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
        assert!("example.com".parse::<IpNet>().is_err());
        assert!("::ffff:a00:0/104".parse::<IpNet>().is_err(), "an IPv4 block written in IPv6");
        assert!("::ffff:10.0.0.1".parse::<IpNet>().is_ok_and(|n| n.contains(ip("10.0.0.1"))));
    }
}
