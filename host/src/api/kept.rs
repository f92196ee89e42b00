//! Kept-alive connections given back when the server is full. A client keeps its connection for
//! the next request (browsers, Python's and Node's clients all do), and an idle one holds one of
//! [`super::ServerLimits::max_connections`] until the header timeout (10 s) cuts it off: on a
//! server near its cap a new client would wait that long in the listen backlog behind
//! connections nobody uses. So, while a new connection waits for a slot, one connection is given
//! back for it: one that has been answered and has no request in flight is closed at once
//! (hyper's graceful shutdown: one whose request has been read finishes it first); if there is
//! none, the first answer given says `Connection: close` and its connection closes after it, or
//! else the first connection to become idle closes. Only one: a single connection waits accepted
//! at a time, and every other client keeps its connection. Waits and event streams are requests
//! in flight: never given back while they last (a stream's answer never carries the close; one
//! read on a connection just chosen hands the debt back to be settled by another); nor
//! is a new connection before its first request (its client may be sending it, and would see no
//! answer), which the header timeout bounds as before.
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
    /// A new connection waits for a slot and none has been chosen to give one back yet: the
    /// first to take it (compare and swap) closes.
    owed: Arc<AtomicBool>,
    /// A connection chosen gave the debt back (its next request holds it long): look again.
    rescan: Arc<Notify>,
}

/// One open connection: its requests in flight, and the call to close it once idle.
pub(super) struct Connection {
    busy: AtomicUsize,
    /// A request has come: the connection is kept alive between requests from now on.
    served: AtomicBool,
    /// Chosen to give its slot back after the answer in flight.
    closing: AtomicBool,
    give_back: Notify,
    owed: Arc<AtomicBool>,
    rescan: Arc<Notify>,
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
            closing: AtomicBool::new(false),
            give_back: Notify::new(),
            owed: self.owed.clone(),
            rescan: self.rescan.clone(),
        });
        self.lock().insert(id, connection.clone());
        Member { id, connections: self.clone(), connection }
    }

    /// A new connection waits (`true`) for a slot, or has one (`false`). Waiting, an idle
    /// connection is given back now, or else the first that is answered or becomes idle.
    pub(super) fn starved(&self, starved: bool) {
        if !starved {
            self.owed.store(false, Ordering::SeqCst);
            return;
        }
        let open = self.lock();
        // One closing already (chosen before, its slot not yet free) gives this slot.
        if open.values().any(|c| c.closing.load(Ordering::SeqCst)) {
            return;
        }
        // Owed before the idle ones are looked at: a connection becoming idle meanwhile either
        // is seen idle here or sees the debt itself (both sequentially consistent).
        self.owed.store(true, Ordering::SeqCst);
        for connection in open.values() {
            if connection.served.load(Ordering::SeqCst)
                && connection.busy.load(Ordering::SeqCst) == 0
                && connection.settles()
            {
                connection.give_back.notify_one();
                break;
            }
        }
    }

    /// Resolves when a connection chosen gave the debt back: `starved(true)` again.
    pub(super) async fn rescan(&self) {
        self.rescan.notified().await
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

    /// Takes the slot owed, if it still is: this connection is the one to close.
    fn settles(&self) -> bool {
        let owed = self.owed.compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        if owed {
            self.closing.store(true, Ordering::SeqCst);
        }
        owed
    }
}

/// A request in flight on its connection.
pub(super) struct Busy(Arc<Connection>);

impl Busy {
    /// A new connection waits for a slot, and this answer, one that ends (not a stream), is the
    /// first to be given since: its connection closes after it, and the answer is to say so.
    pub(super) fn closes_after(&self, ends: bool) -> bool {
        ends && (self.0.closing.load(Ordering::SeqCst) || self.0.settles())
    }

    /// This request holds its connection long (a wait, a stream): if the connection was chosen
    /// to give its slot back (a request read as it was), the debt goes back to be settled by
    /// another. (This one still closes after its request: hyper's shutdown has begun.)
    pub(super) fn holds_long(&self) {
        if self.0.closing.swap(false, Ordering::SeqCst) {
            self.0.rescan.notify_one();
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        if connection.busy.fetch_sub(1, Ordering::SeqCst) == 1
            && (connection.closing.load(Ordering::SeqCst) || connection.settles())
        {
            connection.give_back.notify_one();
        }
    }
}
