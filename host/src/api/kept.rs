//! Kept-alive connections given back when the server is full. A client keeps its connection for
//! the next request (browsers, Python's and Node's clients all do), and an idle one holds one of
//! [`super::ServerLimits::max_connections`] until the header timeout (10 s) cuts it off: on a
//! server near its cap a new client would wait that long in the listen backlog behind
//! connections nobody uses. So, while a new connection waits for a slot, every connection that
//! has been answered and has no request in flight is closed at once (hyper's graceful shutdown:
//! an idle one closes; one whose request has been read finishes it first), and an answer given
//! meanwhile says `Connection: close` and its connection closes after it. Waits and event
//! streams are requests in flight: they are never given back; nor is a new connection before its
//! first request (its client may be sending it, and would see no answer), which the header
//! timeout bounds as before.
//!
//! A request sent on an idle connection as it is closed is lost unanswered, as after the header
//! timeout (the race every HTTP/1.1 keep-alive has): a client sends it again on a new connection,
//! as both clients of this repository do.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// The server's open connections, each with its requests in flight.
#[derive(Default)]
pub(super) struct Connections {
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    next: AtomicU64,
    /// A new connection is waiting for a slot: one that becomes idle closes.
    starved: Arc<AtomicBool>,
}

/// One open connection: its requests in flight, and the call to close it once idle.
pub(super) struct Connection {
    busy: AtomicUsize,
    /// A request has come: the connection is kept alive between requests from now on.
    served: AtomicBool,
    give_back: Notify,
    starved: Arc<AtomicBool>,
}

/// A connection's place among the open ones, left when dropped (the connection closed).
pub(super) struct Member {
    id: u64,
    connections: Arc<Connections>,
    pub(super) connection: Arc<Connection>,
}

impl Connections {
    pub(super) fn join(self: &Arc<Self>) -> Member {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection {
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            give_back: Notify::new(),
            starved: self.starved.clone(),
        });
        self.lock().insert(id, connection.clone());
        Member { id, connections: self.clone(), connection }
    }

    /// A new connection waits (`true`) for a slot, or has one (`false`). Waiting, every idle
    /// connection is given back now, and each that becomes idle later.
    pub(super) fn starved(&self, starved: bool) {
        self.starved.store(starved, Ordering::SeqCst);
        if starved {
            for connection in self.lock().values() {
                if connection.served.load(Ordering::SeqCst) && connection.busy.load(Ordering::SeqCst) == 0 {
                    connection.give_back.notify_one();
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.connections.lock().remove(&self.id);
    }
}

impl Connection {
    /// Resolves once the server asks for this connection back.
    pub(super) async fn given_back(&self) {
        self.give_back.notified().await
    }

    /// A request in flight until the returned guard is dropped (with its answer's body).
    pub(super) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        self.served.store(true, Ordering::SeqCst);
        Busy(self.clone())
    }
}

/// A request in flight on its connection.
pub(super) struct Busy(Arc<Connection>);

impl Busy {
    /// A new connection waits for a slot: this one is to close after its answer.
    pub(super) fn starved(&self) -> bool {
        self.0.starved.load(Ordering::SeqCst)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        if connection.busy.fetch_sub(1, Ordering::SeqCst) == 1 && connection.starved.load(Ordering::SeqCst) {
            connection.give_back.notify_one();
        }
    }
}
