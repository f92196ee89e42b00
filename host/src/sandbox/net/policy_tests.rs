//! The grant's destinations: what each allows, and what a bad one says.

use super::*;

fn policy(toml_text: &str) -> Result<HttpPolicy, String> {
    let c: HttpGrantConfig = toml::from_str(toml_text).map_err(|e| e.to_string())?;
    c.resolve(Path::new("/"))
}

fn target<'a>(scheme: Scheme, host: &'a str, port: u16, method: &'a str, path: &'a str) -> Target<'a> {
    Target { scheme, host, port, method, path }
}

fn allowed(p: &HttpPolicy, t: Target<'_>) -> bool {
    p.destinations.iter().any(|d| d.allows_endpoint(&t) && d.allows_method(t.method) && d.allows_path(t.path))
}

#[test]
fn a_destination_allows_its_scheme_host_and_port_only() {
    let p = policy(r#"allow = ["https://api.example.com", "http://127.0.0.2:8080/hooks/"]"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(allowed(&p, target(Scheme::Https, "api.example.com", 443, "GET", "/x")));
    assert!(allowed(&p, target(Scheme::Https, "API.Example.com.", 443, "POST", "/")));
    assert!(!allowed(&p, target(Scheme::Http, "api.example.com", 443, "GET", "/")), "scheme");
    assert!(!allowed(&p, target(Scheme::Https, "api.example.com", 8443, "GET", "/")), "port");
    assert!(!allowed(&p, target(Scheme::Https, "evil.api.example.com", 443, "GET", "/")), "subdomain");
    assert!(allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/a")));
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/admin")), "path prefix");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/../admin")), "dot segment");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/%2e%2e/admin")), "encoded");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/..;/admin")), "..;");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/..%5cadmin")), "%5c");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/%252e%252e/x")), "double");
    assert!(allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "GET", "/hooks/a?q=%20")), "a query may");
    assert!(!allowed(&p, target(Scheme::Http, "127.0.0.2", 8080, "CONNECT", "/hooks/a")), "CONNECT unlisted");
}

#[test]
fn a_prefix_without_a_slash_ends_at_a_segment() {
    let p = policy(r#"allow = ["https://api.example.com/v1"]"#).unwrap_or_else(|e| panic!("{e}"));
    assert!(allowed(&p, target(Scheme::Https, "api.example.com", 443, "GET", "/v1")));
    assert!(allowed(&p, target(Scheme::Https, "api.example.com", 443, "GET", "/v1/x")));
    assert!(allowed(&p, target(Scheme::Https, "api.example.com", 443, "GET", "/v1?x=1")));
    assert!(!allowed(&p, target(Scheme::Https, "api.example.com", 443, "GET", "/v1-admin")));
}

#[test]
fn a_wildcard_allows_names_under_it_but_not_the_name_itself() {
    let p =
        policy(r#"allow = [{ url = "https://*.example.org", methods = ["get"] }]"#).unwrap_or_else(|e| panic!("{e}"));
    assert!(allowed(&p, target(Scheme::Https, "a.b.example.org", 443, "GET", "/")));
    assert!(!allowed(&p, target(Scheme::Https, "example.org", 443, "GET", "/")));
    assert!(!allowed(&p, target(Scheme::Https, "badexample.org", 443, "GET", "/")));
    assert!(!allowed(&p, target(Scheme::Https, "a.example.org", 443, "POST", "/")), "method");
}

#[test]
fn an_ip_literal_names_its_address_and_addresses_name_blocks() {
    let p = policy(r#"allow = ["http://127.0.0.2:9", { url = "http://mail.internal", addresses = ["10.0.0.0/8"] }]"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let (lit, named) = (&p.destinations[0], &p.destinations[1]);
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
    assert!(lit.allows_address(ip("127.0.0.2")) && !lit.allows_address(ip("127.0.0.1")));
    assert!(named.allows_address(ip("10.1.1.1")) && !named.allows_address(ip("127.0.0.1")));
    assert!(named.allows_address(ip("93.184.215.14")), "public addresses need no naming");
}

#[test]
fn bad_destinations_and_bounds_are_refused_with_what_is_wrong() {
    for (text, says) in [
        (r#"allow = ["ftp://x.com"]"#, "scheme"),
        (r#"allow = ["https://user@x.com"]"#, "user"),
        (r#"allow = ["https://x.com:99999"]"#, "host and port"),
        (r#"allow = ["https://*.com"]"#, "wildcard"),
        (r#"allow = ["https://*"]"#, "`*`"),
        (r#"allow = ["https://a.*.com"]"#, "`*`"),
        (r#"allow = ["x.com"]"#, "scheme://"),
        (r#"allow = [{ url = "https://x.com", addresses = ["10.0.0.0/40"] }]"#, "prefix"),
        (r#"allow = [{ url = "https://x.com", methods = ["G ET"] }]"#, "method"),
        ("allow = []\nmax_requests = 0", "max_requests"),
        ("allow = []\nconnect_timeout = \"0s\"", "connect_timeout"),
        ("allow = []\nca_file = \"/nonexistent.pem\"", "ca_file"),
    ] {
        let err = policy(text).err().unwrap_or_default();
        assert!(err.contains(says), "{text}: {err}");
    }
}
