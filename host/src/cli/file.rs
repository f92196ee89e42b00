//! Options from the operator's configuration file. Besides limits and grants (read by
//! [`taskhost::config::Policy`]), the file may set any option of the command line:
//!
//! ```toml
//! [options]                 # the global options
//! database_url = "postgres://taskhost@db/queue"
//! plugins = "/srv/taskhost/plugins"
//! log = "info"
//!
//! [worker]                  # `taskhost worker`'s options (likewise [add], [list] and [serve])
//! concurrency = 8
//! queues = ["default", "mail"]
//! shutdown_grace = "1m"
//! ```
//!
//! A value from the file becomes the option's default, so a flag wins over the environment, the
//! environment over the file, and the file over the built-in default. Keys are the long option
//! names (`-` or `_`); each value is checked as the flag's would be, and an unknown key or a bad
//! value is one error naming the file, the table and the key.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};
use taskhost::located;

/// The commands whose options the file may set, each in its table (the policy reads the file
/// too, and knows these tables).
/// (`[overseer]` is the maintenance services' settings, read by the policy too.)
const COMMAND_TABLES: &[&str] = &["worker", "add", "list", "serve"];

/// The file named by `--config` in `args` or by `TASKHOST_CONFIG`, if any.
pub fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(path) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("TASKHOST_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// `cmd` with the defaults the configuration file at `path` gives. An error names the file, and
/// the line, column, table and key.
pub fn with_file_defaults(cmd: Command, path: &Path) -> Result<Command, String> {
    let bad = |why: String| taskhost::Error::BadConfig { path: path.to_path_buf(), reason: why }.to_string();
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| bad(located::describe(&e, &text)))?;
    with_table_defaults(cmd, &table).map_err(|e| match located::key_position(&text, &[&e.section, &e.key]) {
        Some(at) => bad(format!("{at}: {e}")),
        None => bad(e.to_string()),
    })
}

/// A key of the file's that is no option, or a value the option refuses.
#[derive(Debug)]
struct KeyError {
    section: String,
    key: String,
    why: String,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}: {}", self.section, self.key, self.why)
    }
}

fn with_table_defaults(mut cmd: Command, table: &toml::Table) -> Result<Command, KeyError> {
    for (section, values) in table {
        let toml::Value::Table(values) = values else { continue };
        if section == "options" {
            for (key, value) in values {
                let arg = find(cmd.get_arguments(), key, true).ok_or_else(|| unknown(section, key))?;
                let defaults = defaults(section, key, &arg, value)?;
                cmd = cmd.mut_arg(arg.get_id().clone(), |a| a.default_values(defaults));
            }
        } else if let Some(sub) = cmd.find_subcommand(section).filter(|_| COMMAND_TABLES.contains(&section.as_str())) {
            let mut set = Vec::new();
            for (key, value) in values {
                let arg = find(sub.get_arguments(), key, false).ok_or_else(|| unknown(section, key))?;
                set.push((arg.get_id().clone(), defaults(section, key, &arg, value)?));
            }
            cmd = cmd.mut_subcommand(section, |mut s| {
                for (id, defaults) in set {
                    s = s.mut_arg(id, |a| a.default_values(defaults));
                }
                s
            });
        }
        // Other tables ([limits], [plugins], [handlers], [queues], [schedules]) are the policy's.
    }
    Ok(cmd)
}

fn unknown(section: &str, key: &str) -> KeyError {
    KeyError { section: section.into(), key: key.into(), why: "no such option".into() }
}

/// The option `--KEY` among `args` (global ones for `[options]`), other than `--config` itself.
fn find<'a>(mut args: impl Iterator<Item = &'a Arg>, key: &str, global: bool) -> Option<Arg> {
    let long = key.replace('_', "-");
    args.find(|a| a.get_long() == Some(long.as_str()) && a.is_global_set() == global && long != "config").cloned()
}

/// The file's value as the option's default values, checked as a flag's value would be.
fn defaults(section: &str, key: &str, arg: &Arg, value: &toml::Value) -> Result<Vec<String>, KeyError> {
    let bad = |why: String| KeyError { section: section.into(), key: key.into(), why };
    let flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let values: Vec<String> = match value {
        toml::Value::Boolean(b) if flag => return Ok(vec![b.to_string()]),
        _ if flag => return Err(bad("expected true or false".into())),
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Integer(i) => vec![i.to_string()],
        toml::Value::Float(f) => vec![f.to_string()],
        toml::Value::Array(items) if arg.get_value_delimiter().is_some() => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad("expected a list of strings".into())))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad(format!("expected a single value, not {}", value.type_str()))),
    };
    // Parse them as the flag would be parsed, alone, to report a bad value against the file.
    let probe = Command::new("taskhost").no_binary_name(true).arg(
        Arg::new("value")
            .long("value")
            .value_name("VALUE")
            .value_parser(arg.get_value_parser().clone())
            .action(ArgAction::Append),
    );
    let argv = values.iter().flat_map(|v| ["--value".to_string(), v.clone()]);
    if let Err(e) = probe.try_get_matches_from(argv) {
        let rendered = e.render().to_string();
        let line = rendered.lines().next().unwrap_or_default();
        return Err(bad(line.trim_start_matches("error: ").replace(" for '--value <VALUE>'", "").to_string()));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::{Cli, Command as Cmd};

    fn parse(file: &str, args: &[&str]) -> Result<Cli, String> {
        let table: toml::Table = toml::from_str(file).map_err(|e| e.to_string())?;
        let cmd = with_table_defaults(Cli::command(), &table).map_err(|e| e.to_string())?;
        let matches = cmd.try_get_matches_from(args).map_err(|e| e.to_string())?;
        Cli::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn a_file_value_is_the_default_and_a_flag_wins() {
        let file =
            "[options]\nplugins = \"/srv/p\"\nno_migrate = true\n[worker]\nconcurrency = 3\nqueues = [\"a\", \"b\"]\n";
        let cli = parse(file, &["taskhost", "worker"]).expect("parsed");
        assert_eq!(cli.plugins_dir, PathBuf::from("/srv/p"));
        assert!(cli.no_migrate);
        let Cmd::Worker(w) = &cli.command else { panic!("worker") };
        assert_eq!((w.concurrency, w.queues.clone()), (3, vec!["a".to_string(), "b".to_string()]));
        let cli = parse(file, &["taskhost", "worker", "--concurrency", "5", "--plugins", "x"]).expect("parsed");
        let Cmd::Worker(w) = &cli.command else { panic!("worker") };
        assert_eq!((w.concurrency, cli.plugins_dir), (5, PathBuf::from("x")));
    }

    #[test]
    fn an_unknown_key_or_a_bad_value_names_the_table_and_the_key() {
        let err = parse("[worker]\nconcurency = 3\n", &["taskhost", "list"]).err().unwrap_or_default();
        assert_eq!(err, "[worker] concurency: no such option");
        let err = parse("[worker]\nconcurrency = 0\n", &["taskhost", "list"]).err().unwrap_or_default();
        assert!(err.starts_with("[worker] concurrency: invalid value '0'") && err.contains("at least 1"), "{err}");
        let err = parse("[options]\nno_migrate = \"yes\"\n", &["taskhost", "list"]).err().unwrap_or_default();
        assert_eq!(err, "[options] no_migrate: expected true or false");
        let err = parse("[options]\nconfig = \"x\"\n", &["taskhost", "list"]).err().unwrap_or_default();
        assert_eq!(err, "[options] config: no such option");
    }

    #[test]
    fn the_config_path_comes_from_the_flag() {
        let args: Vec<OsString> = ["taskhost", "--config=/a.toml", "list"].iter().map(OsString::from).collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("/a.toml")));
        let args: Vec<OsString> = ["taskhost", "list", "--config", "/b.toml"].iter().map(OsString::from).collect();
        assert_eq!(config_path(&args), Some(PathBuf::from("/b.toml")));
    }
}
