//! Plain sockets: refused unless the operator's socket grant (see [`super::socket_grant`])
//! names the host and port, and every refusal says so in the run's logs.
//!
//! wasmtime-wasi refuses sockets itself when the `WasiCtx` allows none, but silently: the guest
//! sees "Permission denied" and nothing tells the operator why. So three functions replace
//! wasmtime-wasi's in the linker (one linker for all handlers; each call asks its own run):
//! - `resolve-addresses`: a name the grant does not hold is refused before any lookup;
//! - `create-tcp-socket`, `create-udp-socket`: refused without a grant of that protocol, or past
//!   the grant's `max_sockets` (lookups count too), so an ungranted guest holds no OS socket.
//!
//! What they allow goes on to wasmtime-wasi's own functions. Each address a granted guest then
//! connects or sends to passes [`SocketRun::allows`], wasmtime-wasi's socket address check of
//! the run, before any packet leaves.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Linker, Resource, ResourceAny};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily};
use wasmtime_wasi::p2::bindings::sockets::{ip_name_lookup, tcp_create_socket, udp_create_socket};
use wasmtime_wasi::p2::{Network, SocketError, TcpSocket, UdpSocket};
use wasmtime_wasi::sockets::{SocketAddrUse, WasiSocketsView};

use super::policy::HostPattern;
use super::socket_grant::{Protocol, SocketPolicy};
use super::NetLog;
use crate::sandbox::codes;
use crate::sandbox::HostState;

/// The version wasmtime-wasi 48 defines them at; guests importing any 0.2 version reach these.
const VERSION: &str = "0.2.12";

/// Longest host name quoted back in a refusal.
const MAX_NAME_CHARS: usize = 253;

/// Longest the host's own lookup of a granted name may take (it also ends at the deadline).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// One run's sockets: its grant, what it used, what its granted names resolved to.
pub struct SocketRun {
    handler: Arc<str>,
    policy: Option<Arc<SocketPolicy>>,
    used: AtomicU32,
    /// A granted name's addresses, looked up once per run: a name that later resolves elsewhere
    /// (DNS rebinding) does not move the run's connections.
    resolved: Mutex<HashMap<String, Vec<IpAddr>>>,
    /// Addresses already written to the log (a UDP socket is checked at every datagram).
    logged: Mutex<HashSet<(&'static str, SocketAddr)>>,
    log: NetLog,
    deadline: tokio::time::Instant,
}

type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

impl SocketRun {
    /// The sockets of one run, as `policy` allows.
    pub fn new(
        handler: Arc<str>,
        policy: Option<Arc<SocketPolicy>>,
        log: NetLog,
        deadline: tokio::time::Instant,
    ) -> Self {
        SocketRun {
            handler,
            policy,
            used: AtomicU32::new(0),
            resolved: Mutex::default(),
            logged: Mutex::default(),
            log,
            deadline,
        }
    }

    /// The grant, if any.
    pub fn policy(&self) -> Option<&SocketPolicy> {
        self.policy.as_deref()
    }

    fn refuse(&self, code: &'static str, message: String) -> ErrorCode {
        self.log.refuse_as("socket", code, message);
        ErrorCode::AccessDenied
    }

    fn not_granted(&self, what: &str) -> String {
        format!(
            "{what} is not granted to handler {}; grants are set in the operator's configuration \
             ([handlers.{}.grants.sockets], or .http for HTTP)",
            self.handler, self.handler
        )
    }

    /// Count one socket or lookup against the grant's bound.
    fn take_one(&self, what: &str) -> Result<&SocketPolicy, ErrorCode> {
        let Some(policy) = self.policy.as_deref() else {
            return Err(self.refuse(codes::DENIED, self.not_granted(what)));
        };
        let used = self.used.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if used > policy.max_sockets {
            let message = format!(
                "{what}: more than the grant's max_sockets of {} sockets and name lookups in one run",
                policy.max_sockets
            );
            return Err(self.refuse(codes::SOCKET_LIMIT, message));
        }
        Ok(policy)
    }

    fn may_create(&self, protocol: Protocol) -> Result<(), ErrorCode> {
        let what = format!("a {} socket", protocol.as_str().to_uppercase());
        let policy = self.take_one(&what)?;
        if !policy.allows(protocol) {
            return Err(self.refuse(codes::DENIED, self.not_granted(&what)));
        }
        Ok(())
    }

    fn may_look_up(&self, name: &str) -> Result<(), ErrorCode> {
        let shown = crate::text::printable(&name.chars().take(MAX_NAME_CHARS).collect::<String>());
        let what = format!("name lookup of {shown:?}");
        let policy = self.take_one(&what)?;
        if name.parse::<IpAddr>().is_ok() || policy.names(name) {
            return Ok(());
        }
        Err(self.refuse(codes::DENIED, self.not_granted(&what)))
    }

    /// wasmtime-wasi's address check: whether this run may use `addr` so.
    pub async fn allows(self: Arc<Self>, addr: SocketAddr, used: SocketAddrUse) -> bool {
        let (protocol, verb) = match used {
            SocketAddrUse::TcpConnect => (Protocol::Tcp, "connect to"),
            SocketAddrUse::UdpSend => (Protocol::Udp, "send to"),
            // Datagrams from elsewhere are dropped unseen, and unlogged: others could flood the log.
            SocketAddrUse::UdpReceive => return self.endpoint(Protocol::Udp, addr).await.is_some(),
            // Connecting and sending bind first: any local address, a port the system picks.
            SocketAddrUse::TcpBind | SocketAddrUse::UdpBind if addr.ip().is_unspecified() && addr.port() == 0 => {
                return true
            }
            _ => {
                let message = format!("listening or accepting on {addr}: a handler never serves");
                self.refuse(codes::DENIED, message);
                return false;
            }
        };
        let Some(via) = self.endpoint(protocol, addr).await else {
            let what = format!("network access to {addr} over {}", protocol.as_str().to_uppercase());
            self.refuse(codes::DENIED, self.not_granted(&what));
            return false;
        };
        let first = self.logged.lock().map(|mut l| l.insert((verb, addr))).unwrap_or(false);
        if first {
            let via = via.map(|name| format!(" ({name})")).unwrap_or_default();
            self.log.note(format!("socket {} {verb} {addr}{via}", protocol.as_str()));
        }
        true
    }

    /// The granted endpoint `addr` is, if any: `Some(Some(name))` when granted through a name.
    async fn endpoint(&self, protocol: Protocol, addr: SocketAddr) -> Option<Option<String>> {
        let policy = self.policy.clone()?;
        for e in policy.endpoints.iter().filter(|e| e.protocol == protocol && e.port == addr.port()) {
            let (resolved, name) = match &e.host {
                HostPattern::Name(name) => (self.resolve(name).await, Some(name.clone())),
                _ => (Vec::new(), None),
            };
            if e.allows_address(addr.ip(), &resolved) {
                return Some(name);
            }
        }
        None
    }

    /// The addresses of a granted name, looked up once per run (nothing if it cannot be).
    async fn resolve(&self, name: &str) -> Vec<IpAddr> {
        if let Some(found) = self.resolved.lock().ok().and_then(|r| r.get(name).cloned()) {
            return found;
        }
        let by =
            tokio::time::Instant::now().checked_add(LOOKUP_TIMEOUT).map_or(self.deadline, |t| t.min(self.deadline));
        // Spawned: the check's future must be Sync, and the shared lookup's is not.
        let owned = name.to_string();
        let found = tokio::spawn(async move { super::dial::lookup(&owned, 0, by).await }).await;
        let found: Vec<IpAddr> = match found {
            Ok(Ok(addrs)) => addrs.iter().map(|a| a.ip()).collect(),
            _ => Vec::new(),
        };
        if let Ok(mut r) = self.resolved.lock() {
            return r.entry(name.to_string()).or_insert(found).clone();
        }
        found
    }
}

/// A wasmtime-wasi error as the guest's: its code, or the trap it is.
fn answer<T>(result: Result<T, SocketError>) -> Answer<T> {
    match result {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}

pub(crate) fn link_sockets(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(&format!("wasi:sockets/ip-name-lookup@{VERSION}"))?.func_wrap(
        "resolve-addresses",
        |mut store: StoreContextMut<'_, HostState>,
         (network, name): (Resource<Network>, String)|
         -> Answer<ResourceAny> {
            let run = store.data().net.sockets().clone();
            if let Err(code) = run.may_look_up(&name) {
                return Ok((Err(code),));
            }
            let found = ip_name_lookup::Host::resolve_addresses(&mut store.data_mut().sockets(), network, name);
            match answer(found)? {
                (Ok(stream),) => Ok((Ok(stream.try_into_resource_any(&mut store)?),)),
                (Err(code),) => Ok((Err(code),)),
            }
        },
    )?;
    linker.instance(&format!("wasi:sockets/tcp-create-socket@{VERSION}"))?.func_wrap(
        "create-tcp-socket",
        |mut store: StoreContextMut<'_, HostState>, (family,): (IpAddressFamily,)| -> Answer<Resource<TcpSocket>> {
            if let Err(code) = store.data().net.sockets().may_create(Protocol::Tcp) {
                return Ok((Err(code),));
            }
            answer(tcp_create_socket::Host::create_tcp_socket(&mut store.data_mut().sockets(), family))
        },
    )?;
    linker.instance(&format!("wasi:sockets/udp-create-socket@{VERSION}"))?.func_wrap_async(
        "create-udp-socket",
        |mut store: StoreContextMut<'_, HostState>, (family,): (IpAddressFamily,)| {
            Box::new(async move {
                if let Err(code) = store.data().net.sockets().may_create(Protocol::Udp) {
                    return Ok((Err(code),));
                }
                let created = udp_create_socket::Host::create_udp_socket(&mut store.data_mut().sockets(), family).await;
                answer::<Resource<UdpSocket>>(created)
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
