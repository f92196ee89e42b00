//! A guest's stdout and stderr. Each line becomes a log line of the run (`[stdout] …`,
//! `[stderr] …`) within the run's log cap, and the last few are kept for the message of a run
//! that traps: a Python traceback or a JavaScript `Error` then says what went wrong.
//!
//! Everything here is bounded before the host pays for it: a write is accepted 64 KiB at a
//! time, a line without an end is cut at 8 KiB, lines past the log cap are counted, not kept.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Most bytes the guest may hand over in one write.
const WRITE_PERMIT: usize = 64 << 10;
/// Longest line kept; the rest of a longer one is dropped.
const MAX_LINE_BYTES: usize = 8 << 10;
/// Lines remembered for a trap's message, and the bytes kept of each.
const TAIL_LINES: usize = 6;
const TAIL_LINE_BYTES: usize = 240;
/// The last stderr lines kept whole (to a bound) for an uncaught exception's report.
const STDERR_LINES: usize = 64;
const STDERR_LINE_BYTES: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Stdout,
    Stderr,
}

impl Which {
    fn label(self) -> &'static str {
        match self {
            Which::Stdout => "stdout",
            Which::Stderr => "stderr",
        }
    }
}

/// What a run printed.
#[derive(Debug, Default)]
pub struct Printed {
    /// Finished lines, `[stdout] text` each, at most `cap` bytes.
    pub lines: String,
    /// Lines not kept: over the cap.
    pub dropped: u64,
    cap: usize,
    /// The line each stream is in the middle of.
    pending: [Vec<u8>; 2],
    /// A line too long, being skipped to its end.
    skipping: [bool; 2],
    tail: VecDeque<String>,
    /// The last lines of stderr, without their label.
    stderr: VecDeque<String>,
}

impl Printed {
    fn take(&mut self, which: Which, mut bytes: &[u8]) {
        let i = which as usize;
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(n) => (&bytes[..n], Some(n + 1)),
                None => (bytes, None),
            };
            if !self.skipping[i] {
                let room = MAX_LINE_BYTES.saturating_sub(self.pending[i].len());
                self.pending[i].extend_from_slice(&part[..part.len().min(room)]);
                if part.len() > room {
                    self.skipping[i] = true;
                    self.end_line(which, true);
                }
            }
            match ended {
                Some(n) => {
                    if !self.skipping[i] {
                        self.end_line(which, false);
                    }
                    self.skipping[i] = false;
                    bytes = &bytes[n..];
                }
                None => break,
            }
        }
    }

    fn end_line(&mut self, which: Which, cut: bool) {
        let raw = std::mem::take(&mut self.pending[which as usize]);
        let mut text = crate::text::one_line(&String::from_utf8_lossy(&raw));
        if cut {
            text.push_str(" …");
        }
        if which == Which::Stderr {
            if self.stderr.len() == STDERR_LINES {
                self.stderr.pop_front();
            }
            self.stderr.push_back(crate::text::bounded(&text, STDERR_LINE_BYTES, "…"));
        }
        let line = format!("[{}] {text}\n", which.label());
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(crate::text::bounded(&line[..line.len() - 1], TAIL_LINE_BYTES, "…"));
        if self.lines.len() + line.len() <= self.cap {
            self.lines.push_str(&line);
        } else {
            self.dropped += 1;
        }
    }

    /// End the lines still open (a guest that stopped mid-line).
    pub fn finish(&mut self) {
        for which in [Which::Stdout, Which::Stderr] {
            if !self.pending[which as usize].is_empty() {
                self.end_line(which, false);
            }
        }
    }

    /// The last lines of stderr (up to 64), for [`super::uncaught`].
    pub fn stderr_lines(&self) -> impl Iterator<Item = &str> {
        self.stderr.iter().map(String::as_str)
    }

    /// The last lines printed, joined on one line, for an error message.
    pub fn tail(&self) -> Option<String> {
        (!self.tail.is_empty()).then(|| self.tail.iter().cloned().collect::<Vec<_>>().join(" | "))
    }
}

/// The two streams of one run, writing into one [`Printed`].
#[derive(Debug, Clone)]
pub struct GuestOutput {
    printed: Arc<Mutex<Printed>>,
}

impl GuestOutput {
    /// Lines kept up to `cap` bytes.
    pub fn new(cap: usize) -> Self {
        GuestOutput { printed: Arc::new(Mutex::new(Printed { cap, ..Printed::default() })) }
    }

    pub fn stdout(&self) -> GuestStream {
        GuestStream { printed: self.printed.clone(), which: Which::Stdout }
    }

    pub fn stderr(&self) -> GuestStream {
        GuestStream { printed: self.printed.clone(), which: Which::Stderr }
    }

    /// What was printed, its open lines ended.
    pub fn take(&self) -> Printed {
        let mut p = std::mem::take(&mut *self.printed.lock().unwrap_or_else(|e| e.into_inner()));
        p.finish();
        p
    }
}

/// One of a run's output streams, as WASI sees it.
#[derive(Debug, Clone)]
pub struct GuestStream {
    printed: Arc<Mutex<Printed>>,
    which: Which,
}

impl GuestStream {
    fn write_bytes(&self, bytes: &[u8]) {
        self.printed.lock().unwrap_or_else(|e| e.into_inner()).take(self.which, bytes);
    }
}

impl IsTerminal for GuestStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for GuestStream {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        // wasmtime copied at most the permit `check_write` gave.
        self.write_bytes(&bytes[..bytes.len().min(WRITE_PERMIT)]);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for GuestStream {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let n = buf.len().min(WRITE_PERMIT);
        self.write_bytes(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_bounded_and_counted_past_the_cap() {
        let out = GuestOutput::new(40);
        let (o, e) = (out.stdout(), out.stderr());
        o.write_bytes(b"hello ");
        e.write_bytes(b"oops\n");
        o.write_bytes(b"world\nsecond line that is long\nthird");
        let p = out.take();
        assert_eq!(p.lines, "[stderr] oops\n[stdout] hello world\n");
        assert_eq!(p.dropped, 2, "two lines past the cap of 40 bytes");
        assert_eq!(
            p.tail().as_deref(),
            Some("[stderr] oops | [stdout] hello world | [stdout] second line that is long | [stdout] third")
        );
    }

    #[test]
    fn an_endless_line_is_cut_and_costs_no_more_than_its_bound() {
        let out = GuestOutput::new(1 << 20);
        let s = out.stderr();
        for _ in 0..100 {
            s.write_bytes(&[b'x'; 1000]);
        }
        s.write_bytes(b"\nnext\n");
        let p = out.take();
        let lines: Vec<_> = p.lines.lines().collect();
        assert_eq!(lines.len(), 2, "{:?}", &p.lines[..80]);
        assert!(lines[0].len() < MAX_LINE_BYTES + 20 && lines[0].ends_with(" …"));
        assert_eq!(lines[1], "[stderr] next");
    }
}
