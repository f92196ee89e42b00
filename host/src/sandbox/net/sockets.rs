//! Plain sockets stay refused (no grant opens them), but a refusal now says so. wasmtime-wasi
//! refuses them itself when the `WasiCtx` allows none, silently: the guest sees "Permission
//! denied" or "Non-recoverable failure in name resolution" and nothing tells the operator why.
//! These three functions replace wasmtime-wasi's in the linker: each refuses as before (no
//! socket is created, no name is looked up) and notes the refusal in the run's network log, so
//! the run's logs say it and a run that then fails ends as `denied`.

use wasmtime::component::{Linker, ResourceAny};
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily};

use crate::sandbox::codes;
use crate::sandbox::HostState;

/// The version wasmtime-wasi 48 defines them at; guests importing any 0.2 version reach these.
const VERSION: &str = "0.2.12";

/// Longest host name quoted back in a refusal.
const MAX_NAME_CHARS: usize = 253;

type Refused = wasmtime::Result<(Result<ResourceAny, ErrorCode>,)>;

pub(crate) fn refuse_sockets(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(&format!("wasi:sockets/ip-name-lookup@{VERSION}"))?.func_wrap(
        "resolve-addresses",
        |mut store: StoreContextMut<'_, HostState>, (_network, name): (ResourceAny, String)| -> Refused {
            let name = crate::text::printable(&name.chars().take(MAX_NAME_CHARS).collect::<String>());
            refuse(&mut store, &format!("name lookup of {name:?}"));
            Ok((Err(ErrorCode::AccessDenied),))
        },
    )?;
    for (protocol, instance, func) in
        [("TCP", "tcp-create-socket", "create-tcp-socket"), ("UDP", "udp-create-socket", "create-udp-socket")]
    {
        linker.instance(&format!("wasi:sockets/{instance}@{VERSION}"))?.func_wrap(
            func,
            move |mut store: StoreContextMut<'_, HostState>, (_family,): (IpAddressFamily,)| -> Refused {
                refuse(&mut store, &format!("a {protocol} socket"));
                Ok((Err(ErrorCode::AccessDenied),))
            },
        )?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

fn refuse(store: &mut StoreContextMut<'_, HostState>, what: &str) {
    let net = &store.data().net;
    let message = format!(
        "{what} is not granted to handler {}: plain sockets are never granted; make HTTP requests through \
         wasi:http, under a network grant in the operator's configuration",
        net.handler()
    );
    net.log().refuse_as("socket", codes::DENIED, message);
}
