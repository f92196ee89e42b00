//! A TCP proxy to a database server that can be frozen: while frozen it takes connections and
//! moves no byte either way, as a network cut that no peer notices (no reset, no close).

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Freezer {
    /// `127.0.0.1:PORT`, where it listens.
    pub addr: String,
    frozen: Arc<watch::Sender<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Freezer {
    /// A proxy to `upstream` (`host:port`), passing bytes until frozen.
    pub async fn start(upstream: &str) -> Freezer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let frozen = Arc::new(watch::channel(false).0);
        let (upstream, on) = (upstream.to_string(), frozen.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else { continue };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pass(cr, sw, on.subscribe()));
                tokio::spawn(pass(sr, cw, on.subscribe()));
            }
        });
        Freezer { addr, frozen, task }
    }

    /// Stop (`true`) or resume moving bytes.
    pub fn freeze(&self, frozen: bool) {
        self.frozen.send_replace(frozen);
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bytes from `from` to `to`, none while frozen (before a read, and before its write).
async fn pass(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
