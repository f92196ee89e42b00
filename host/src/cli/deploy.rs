//! `taskhost deploy`, `versions`, `rollback`: handlers published into the database, for every
//! worker on every machine.

use std::path::Path;

use anyhow::Result;
use taskhost::plugins::short;
use taskhost::store::components::{HandlerVersion, Release};
use taskhost::App;

/// Who deploys, as recorded: this user on this machine.
pub fn who() -> String {
    let named = ["USER", "LOGNAME"].iter().find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()));
    let user = named.unwrap_or_else(process_user);
    let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "?".into());
    format!("{user}@{host}")
}

/// Without `USER` or `LOGNAME` (a service, a container's shell): this process's user, as `id -un`
/// names it from `/etc/passwd`, else its number.
#[cfg(unix)]
fn process_user() -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else { return "?".into() };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let uid_text = uid.to_string();
    let name = passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid_text).then(|| name.to_string())
    });
    name.unwrap_or_else(|| format!("uid {uid}"))
}

#[cfg(not(unix))]
fn process_user() -> String {
    "?".into()
}

/// `deploy PATH [--name NAME] [--compile]`: check each component as a worker would and store
/// it, active; a directory's each `NAME.wasm` (those unchanged are said so). Fails when any is
/// refused (the others are deployed).
pub async fn deploy(app: &App, path: &Path, name: Option<&str>, compile: bool, json: bool) -> Result<()> {
    let sources = taskhost::plugins::publish::deploy_sources(path, name)?;
    if sources.is_empty() {
        anyhow::bail!("no NAME.wasm in {}: nothing to deploy", path.display());
    }
    let by = who();
    let one = sources.len() == 1;
    let mut refused = 0;
    let mut out = Vec::new();
    for (name, file) in sources {
        let catalog = app.catalog.clone();
        let checked = tokio::task::spawn_blocking({
            let name = name.clone();
            move || catalog.check_to_deploy(&name, &file, compile)
        })
        .await?;
        let component = match checked {
            Ok(c) => c,
            Err(reason) => {
                refused += 1;
                eprintln!("refused {name}: {reason}");
                out.push(serde_json::json!({"handler": name, "refused": reason}));
                continue;
            }
        };
        let deployed = app.client.deploy(&component, &by).await?;
        let (digest, size) = (short(&component.digest), megabytes(component.bytes.len() as i64));
        match deployed.release {
            Some(r) if !json => println!("deployed {name} {digest} ({size}), release {r}"),
            None if !json && deployed.stored => {
                println!("stored {name} {digest} ({size}) again: its copy was not whole")
            }
            None if !json => println!("unchanged {name} {digest} ({size}): active already"),
            _ => {}
        }
        out.push(serde_json::json!({
            "handler": name, "digest": component.digest, "size": component.bytes.len(),
            "release": deployed.release, "stored": deployed.stored,
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    match refused {
        0 => {}
        // One file's refusal is its one line (`refused NAME: why`), said above.
        _ if one => return Err(super::Reported.into()),
        n => anyhow::bail!("{n} of the components were refused"),
    }
    Ok(())
}

/// `versions NAME`: its versions, the active one marked; with `history`, its releases.
pub async fn versions(app: &App, handler: &str, history: bool, json: bool) -> Result<()> {
    if history {
        let releases = app.client.releases(handler, 100).await?;
        match json {
            true => println!("{}", serde_json::to_string_pretty(&releases)?),
            false => print!("{}", release_table(&releases)),
        }
        return Ok(());
    }
    let versions = app.client.versions(handler).await?;
    match json {
        true => println!("{}", serde_json::to_string_pretty(&versions)?),
        false => print!("{}", version_table(&versions)),
    }
    Ok(())
}

/// `rollback NAME [--to DIGEST]`.
pub async fn rollback(app: &App, handler: &str, to: Option<&str>) -> Result<()> {
    let r = app.client.rollback(handler, to, &who()).await?;
    println!("rolled {handler} back to {}, release {}", short(&r.digest), r.id);
    Ok(())
}

fn megabytes(bytes: i64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn version_table(versions: &[HandlerVersion]) -> String {
    let mut out = format!(
        "{:<2} {:<12} {:>9} {:<19} {:<24} {:<19} {:>6}\n",
        "", "VERSION", "SIZE", "DEPLOYED", "BY", "LAST ACTIVE", "PINNED"
    );
    for v in versions {
        let mark = if v.active { "*" } else { "" };
        let released = v.released_on.map(time).unwrap_or_default();
        out.push_str(&format!(
            "{mark:<2} {:<12} {:>9} {:<19} {:<24} {released:<19} {:>6}\n",
            short(&v.digest),
            megabytes(v.size),
            time(v.deployed_on),
            crate::output::clip(&v.deployed_by, 24),
            v.pinned
        ));
    }
    out
}

fn release_table(releases: &[Release]) -> String {
    let mut out = format!("{:>7} {:<19} {:<8} {:<12} {}\n", "RELEASE", "WHEN", "ACTION", "VERSION", "BY");
    for r in releases {
        out.push_str(&format!(
            "{:>7} {:<19} {:<8} {:<12} {}\n",
            r.id,
            time(r.released_on),
            r.action.as_str(),
            short(&r.digest),
            r.released_by
        ));
    }
    out
}
