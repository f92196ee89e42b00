//! The `taskhost` command. Thin: parse, set up logging, run, print one line on error.

#![warn(clippy::too_many_lines)]

mod cli;
mod demo;
mod output;
mod shutdown;

use clap::{CommandFactory, FromArgMatches};

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The configuration file's options are the defaults: flags and the environment win.
    let mut command = cli::Cli::command();
    if let Some(path) = cli::file::config_path(&args) {
        command = match cli::file::with_file_defaults(command, &path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
    }
    let cli = match cli::Cli::from_arg_matches(&command.get_matches_from(args)) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Rust ignores SIGPIPE, so printing to a closed pipe panics (exit 101); a printing command
    // takes the default back and ends quietly. Sockets are unaffected (written with MSG_NOSIGNAL).
    #[cfg(unix)]
    if cli.command.only_prints() {
        // SAFETY: one call before any thread starts, restoring the signal's default.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let _telemetry = match cli::telemetry::init(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(cli::run(cli));
    // Blocking work still going (a plugin compile) must not hold the exit past the shutdown
    // grace: it is dropped, not waited for (the cache's files are written whole or not at all).
    runtime.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.is::<cli::Reported>() => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
