//! What a browser could be made to send: the API answers a person's browser (the dashboard) as
//! well as programs, so another site's page must not be able to act through it.
//!
//! - A write (any method but GET and HEAD) whose `Origin` is not this server's own address is
//!   refused: a page elsewhere can make a browser post a form or a simple `fetch` here without
//!   asking first (cross-site request forgery), and without tokens nothing else would stop it.
//! - Without tokens, a request whose `Host` is not a loopback name or address is refused: a name
//!   of another site that resolves to 127.0.0.1 would otherwise let its page read the answers
//!   (DNS rebinding). With tokens, the token itself is the proof, and a browser never adds one
//!   on its own. The `Host` is exactly such a name with an optional port: `localhost:evil.example`
//!   is not loopback.
//! - A request whose target is an absolute URL (`GET http://elsewhere/...`, a proxy's form) is
//!   refused: it would name a host the check above never sees.
//!
//! Programs (curl, Python, Node) send no `Origin` and name the address they call as `Host`, so
//! this changes nothing for them.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{ApiError, ApiState};

pub(super) async fn same_origin(State(state): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    match refusal(&req, state.access.tokens.is_empty()) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    }
}

fn refusal(req: &Request, open: bool) -> Option<ApiError> {
    if req.uri().scheme().is_some() || req.uri().authority().is_some() {
        // `GET http://elsewhere/...`: a proxy's request, which could name any host past the check below.
        let message = "a request names its target by path alone (origin form), not as an absolute URL";
        return Some(ApiError::new(StatusCode::BAD_REQUEST, "absolute-target", message));
    }
    let text = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST);
    if open && !host.is_some_and(is_loopback) {
        let message = "without tokens the API answers only requests to a loopback name (localhost, 127.0.0.1, [::1])";
        return Some(ApiError::new(StatusCode::FORBIDDEN, "forbidden-host", message));
    }
    let write = !matches!(*req.method(), Method::GET | Method::HEAD);
    let foreign = match text(header::ORIGIN) {
        Some(origin) => !host.is_some_and(|h| same_authority(origin, h)),
        None => text(header::HeaderName::from_static("sec-fetch-site")) == Some("cross-site"),
    };
    let message = "a write from a page of another site is refused (its Origin is not this server)";
    (write && foreign).then(|| ApiError::new(StatusCode::FORBIDDEN, "cross-origin", message))
}

/// `host[:port]` names this machine, and nothing follows: `localhost`, a loopback IPv4 address, or
/// `[` a loopback IPv6 address `]`, each with an optional port of digits.
fn is_loopback(authority: &str) -> bool {
    let (name, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, "")) => (name, None),
            Some((name, after)) => match after.strip_prefix(':') {
                Some(port) => (name, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    let v6 = authority.starts_with('[');
    let name_ok = match name.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => v6 && ip.is_loopback(),
        Ok(IpAddr::V4(ip)) => !v6 && ip.is_loopback(),
        Err(_) => !v6 && name.eq_ignore_ascii_case("localhost"),
    };
    port_ok && name_ok
}

/// An `Origin` (`scheme://host[:port]`) names the same host and port as `Host`.
fn same_authority(origin: &str, host: &str) -> bool {
    let (scheme, authority) = match origin.split_once("://") {
        Some(parts) => parts,
        None => return false, // "null": a sandboxed page or a file
    };
    let with_port = |a: &str, default: &str| -> String {
        let a = a.to_ascii_lowercase();
        let has_port =
            a.rsplit_once(':').is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit()) && !a.ends_with(']'));
        if has_port {
            a
        } else {
            format!("{a}:{default}")
        }
    };
    let default = if scheme.eq_ignore_ascii_case("https") { "443" } else { "80" };
    with_port(authority, default) == with_port(host, default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_with_or_without_a_port_are_loopback() {
        for a in ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:3000", "127.8.9.1:1", "[::1]", "[::1]:80"] {
            assert!(is_loopback(a), "{a}");
        }
        for a in ["example.com", "evil.example:8080", "10.0.0.1:80", "localhost.evil.example", "[::2]:80", ""] {
            assert!(!is_loopback(a), "{a}");
        }
    }

    #[test]
    fn a_loopback_name_followed_by_anything_but_a_port_is_not_loopback() {
        for a in [
            "localhost:evil.example",
            "127.0.0.1:8080.evil.example",
            "[::1].evil.example",
            "[::1]:80.evil.example",
            "[::1]x",
            "localhost:",
            "localhost:123456",
            "127.0.0.1:80:80",
            "[127.0.0.1]",
            "::1",
            "[localhost]",
        ] {
            assert!(!is_loopback(a), "{a}");
        }
    }

    #[test]
    fn an_origin_is_the_same_only_with_the_same_host_and_port() {
        assert!(same_authority("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(same_authority("http://Example.com", "example.com:80"));
        assert!(same_authority("https://example.com", "example.com:443"));
        assert!(same_authority("http://[::1]:9000", "[::1]:9000"));
        assert!(!same_authority("http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!same_authority("http://evil.example", "127.0.0.1:80"));
        assert!(!same_authority("null", "127.0.0.1:8080"));
        assert!(!same_authority("http://[::1]", "[::1]:9000"));
    }
}
