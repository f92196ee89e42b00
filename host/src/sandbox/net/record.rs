//! What a run did on the network: one line per request for the run's logs, and the first
//! refusal, which becomes the run's error if the run then fails.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Request lines kept per run; later requests are counted in one line.
const MAX_LINES: usize = 200;
/// Longest line kept: what a guest chose (a host, a path) is cut, so the log of a run holds at
/// most `MAX_LINES` × this.
const MAX_LINE_BYTES: usize = 512;

fn bounded(s: String) -> String {
    if s.len() <= MAX_LINE_BYTES {
        return s;
    }
    crate::text::bounded(&s, MAX_LINE_BYTES, "…")
}

/// Why the host refused a request: not granted (`denied`) or over a bound (`http-limit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The run's error code for it.
    pub code: &'static str,
    /// Why, for a person.
    pub message: String,
}

#[derive(Debug, Default)]
struct Entries {
    lines: Vec<Entry>,
    unlisted: u64,
    refusal: Option<Refusal>,
}

#[derive(Debug)]
struct Entry {
    what: String,
    started: Instant,
    status: Option<u16>,
    bytes_out: u64,
    bytes_in: u64,
    ended: Option<(Instant, Option<String>)>,
    /// A line as it is (a refusal, a socket's use), not a request's.
    plain: bool,
}

/// Shared by a run's store and the tasks that carry its requests.
#[derive(Debug, Clone, Default)]
pub struct NetLog(Arc<Mutex<Entries>>);

/// One request's place in the log; updates after the log is full are dropped.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    log: NetLog,
    index: Option<usize>,
}

impl Entries {
    /// Keep `entry` if there is room, else count it; its index if kept.
    fn push(&mut self, entry: Entry) -> Option<usize> {
        if self.lines.len() < MAX_LINES {
            self.lines.push(entry);
            Some(self.lines.len() - 1)
        } else {
            self.unlisted += 1;
            None
        }
    }

    /// The run's refusal is its first.
    fn refused(&mut self, code: &'static str, message: String) {
        self.refusal.get_or_insert(Refusal { code, message });
    }
}

impl NetLog {
    fn with<R>(&self, f: impl FnOnce(&mut Entries) -> R) -> R {
        let mut guard = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }

    /// Note a refused HTTP request: its line, and the run's refusal if it is the first.
    pub fn refuse(&self, code: &'static str, message: String) {
        self.refuse_as("http", code, message)
    }

    /// The same for a refusal of another `kind` (`socket`).
    pub fn refuse_as(&self, kind: &'static str, code: &'static str, message: String) {
        let message = bounded(message);
        tracing::debug!(code, kind, "network access refused: {message}");
        self.with(|e| {
            e.push(Entry::plain(format!("{kind} refused, {code}: {message}")));
            e.refused(code, message);
        })
    }

    /// Note a line as it is: `socket tcp connect to ADDR`.
    pub fn note(&self, line: String) {
        self.with(|e| e.push(Entry::plain(bounded(line))));
    }

    /// Start the line of a request going out: `what` is its method and URL without the query.
    pub fn start(&self, what: String) -> RequestRecord {
        let what = bounded(what);
        let index = self.with(|e| {
            e.push(Entry {
                what,
                started: Instant::now(),
                status: None,
                bytes_out: 0,
                bytes_in: 0,
                ended: None,
                plain: false,
            })
        });
        RequestRecord { log: self.clone(), index }
    }

    /// The first request the host refused, if any.
    pub fn refusal(&self) -> Option<Refusal> {
        self.with(|e| e.refusal.clone())
    }

    /// The log lines, `http ...` each; a request still going when the run ended says so.
    pub fn lines(&self) -> Vec<String> {
        self.with(|e| {
            let mut out: Vec<String> = e.lines.iter().map(Entry::line).collect();
            if e.unlisted > 0 {
                out.push(format!("http: {} more requests not listed", e.unlisted));
            }
            out
        })
    }
}

impl Entry {
    /// A line kept as it is, ended when written.
    fn plain(what: String) -> Entry {
        let now = Instant::now();
        Entry { what, started: now, status: None, bytes_out: 0, bytes_in: 0, ended: Some((now, None)), plain: true }
    }

    fn line(&self) -> String {
        if self.plain {
            return self.what.clone();
        }
        let status = self.status.map_or("no response".to_string(), |s| s.to_string());
        let (ms, error) = match &self.ended {
            Some((at, error)) => (at.duration_since(self.started).as_millis(), error.clone()),
            None => (self.started.elapsed().as_millis(), Some("still going when the run ended".to_string())),
        };
        let mut line = format!(
            "http {} -> {status}, {} bytes out, {} bytes in, {ms} ms",
            self.what, self.bytes_out, self.bytes_in
        );
        if let Some(error) = error {
            line.push_str(&format!(" ({error})"));
        }
        line
    }
}

impl RequestRecord {
    fn update(&self, f: impl FnOnce(&mut Entry)) {
        if let Some(i) = self.index {
            self.log.with(|e| {
                if let Some(entry) = e.lines.get_mut(i) {
                    f(entry)
                }
            })
        }
    }

    pub fn status(&self, status: u16) {
        self.update(|e| e.status = Some(status))
    }

    pub fn sent(&self, n: u64) {
        self.update(|e| e.bytes_out += n)
    }

    pub fn received(&self, n: u64) {
        self.update(|e| e.bytes_in += n)
    }

    /// The request ended, with an error or not; only the first end counts.
    pub fn end(&self, error: Option<String>) {
        self.update(|e| {
            if e.ended.is_none() {
                e.ended = Some((Instant::now(), error.map(bounded)))
            }
        })
    }

    /// A refusal met on the way (a denied address, a body over its bound): the run's refusal
    /// if it is the first, and this request's end.
    pub fn refuse(&self, code: &'static str, message: String) {
        let message = bounded(message);
        self.end(Some(format!("{code}: {message}")));
        self.log.with(|e| e.refused(code, message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_log_is_bounded_whatever_the_guest_names() {
        let log = NetLog::default();
        let huge = "h".repeat(1 << 20);
        for _ in 0..MAX_LINES {
            log.refuse("denied", format!("network access to {huge} is not granted"));
        }
        let r = log.start(format!("GET http://{huge}/"));
        r.end(Some(huge.clone()));
        log.refuse("denied", huge.clone());
        let lines = log.lines();
        assert_eq!(lines.len(), MAX_LINES + 1, "the rest are counted in one line");
        assert_eq!(lines.last().map(String::as_str), Some("http: 2 more requests not listed"));
        assert!(lines.iter().all(|l| l.len() <= MAX_LINE_BYTES + 32), "every line is cut");
        assert!(log.refusal().is_some_and(|r| r.message.len() <= MAX_LINE_BYTES), "so is the run's refusal");
    }
}
