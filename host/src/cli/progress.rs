//! What a compile shows on a terminal: a spinner with the plugin's name, its size and the time
//! so far, then one line with the time it took. Off a terminal the log lines say the same
//! (`--log info`: `compiling NAME (18.0 MB), once: …`, `compiled NAME in 7s 112ms`).

use std::io::{IsTerminal, Write};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use taskhost::plugins::CompileProgress;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// The spinner, when standard error is a terminal.
pub fn on_terminal() -> Option<CompileProgress> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(Arc::new(|name: &str, bytes: usize| Box::new(Spinner::start(name, bytes)) as Box<dyn std::any::Any + Send>))
}

/// A spinner line while one compile runs; dropping it ends the line.
struct Spinner {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Spinner {
    fn start(name: &str, bytes: usize) -> Spinner {
        let what = format!("compiling {name} ({:.1} MB; once, then cached)", bytes as f64 / f64::from(1 << 20));
        let name = name.to_string();
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("taskhost-spinner".into())
            .spawn(move || {
                let mut err = std::io::stderr();
                for frame in FRAMES.iter().cycle() {
                    let _ = write!(err, "\r\x1b[2K{frame} {what} {:.1}s", started.elapsed().as_secs_f64());
                    let _ = err.flush();
                    match stopped.recv_timeout(TICK) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                let took = taskhost::text::duration(started.elapsed());
                let _ = writeln!(err, "\r\x1b[2Kcompiled {name} in {took}");
            })
            .ok();
        Spinner { stop: Some(stop), thread }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
