//! Unit tests of the command line's arguments.

use clap::CommandFactory;

use super::*;
use taskhost::text::parse_time;

/// `--help` tells what every option and argument is for.
#[test]
fn every_option_and_argument_has_help() {
    let mut missing = Vec::new();
    let root = Cli::command();
    let mut commands = vec![root.clone()];
    commands.extend(root.get_subcommands().cloned());
    for cmd in &commands {
        for arg in cmd.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && arg.get_help().is_none() {
                missing.push(format!("{} {}", cmd.get_name(), arg.get_id()));
            }
        }
    }
    assert!(missing.is_empty(), "options without help: {missing:?}");
}

#[test]
fn a_time_without_a_zone_is_refused_with_the_fix() {
    assert!(parse_time("2026-01-02T03:04:05Z").is_ok());
    assert!(parse_time("2026-01-02T03:04:05+01:00").is_ok());
    let err = parse_time("2026-01-02T03:04:05").err().unwrap_or_default();
    assert!(err.contains("add Z"), "{err}");
}
