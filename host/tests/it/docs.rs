//! The manual cannot drift from the code: every link in the README and `docs/` leads somewhere,
//! the README's five-minute tour runs as written, the library page shows the example that
//! compiles, and docs/status.md names what the docs describe as done.

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo_root;

/// The README, BENCHMARKS.md and every page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("docs/ entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A page's lines outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|(n, line)| (n + 1, line))
        .collect()
}

/// The anchors a page offers: its headings as GitHub spells them (lower case, punctuation
/// dropped, spaces as hyphens, a repeated one numbered) and its `<a id="…">` tags.
fn anchors(text: &str) -> HashSet<String> {
    let mut found = HashSet::new();
    for (_, line) in prose(text) {
        if let Some(title) = line.strip_prefix('#').map(|l| l.trim_start_matches('#')) {
            let slug: String = title
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            let mut unique = slug.clone();
            let mut n = 0;
            while !found.insert(unique.clone()) {
                n += 1;
                unique = format!("{slug}-{n}");
            }
        }
        for part in line.split("<a id=\"").skip(1) {
            found.insert(part.split('"').next().unwrap_or_default().to_string());
        }
    }
    found
}

/// Every `[text](target)` of a page's prose, with the line it is on.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose(text) {
        for part in line.split("](").skip(1) {
            if let Some(end) = part.find(')') {
                found.push((n, part[..end].to_string()));
            }
        }
    }
    found
}

#[test]
fn every_link_in_the_readme_and_the_docs_leads_to_a_page_and_a_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page is in a folder");
        for (line, target) in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if file.is_empty() { page.clone() } else { dir.join(file) };
            let name = format!("{} line {line}: {target}", page.display());
            if !linked.exists() {
                broken.push(format!("{name}: no such file"));
            } else if !anchor.is_empty() && !anchors(&read(&linked)).contains(anchor) {
                broken.push(format!("{name}: no such heading"));
            }
        }
    }
    assert!(checked > 100, "only {checked} links found: is the parser still right?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_links_every_page_of_the_docs() {
    let readme = read(&repo_root().join("README.md"));
    for page in pages().iter().filter(|p| p.parent().is_some_and(|d| d.ends_with("docs"))) {
        let name = page.file_name().and_then(|n| n.to_str()).expect("a page name");
        assert!(readme.contains(&format!("](docs/{name})")), "the README does not link docs/{name}");
    }
}

/// A level-2 section of a page, heading included, up to the next.
fn section(text: &str, title: &str) -> String {
    let start = text.find(&format!("\n## {title}\n")).unwrap_or_else(|| panic!("no section ## {title}"));
    let rest = &text[start + 1..];
    rest[3..].find("\n## ").map_or(rest, |end| &rest[..end + 3]).to_string()
}

/// docs/status.md names each capability documented under Workers as done, and no "not yet"
/// clause names one of them: the status stays true as sections are added.
#[test]
fn the_status_page_does_not_call_a_documented_capability_not_done() {
    let root = repo_root();
    let workers = section(&read(&root.join("docs/queue.md")), "Workers");
    let status = read(&root.join("docs/status.md"));
    let capabilities: Vec<String> = workers
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter_map(|h| h.split_whitespace().next().map(str::to_lowercase))
        .collect();
    assert!(capabilities.len() >= 6, "{capabilities:?}");
    let lower = status.to_lowercase();
    let not_yet: Vec<&str> = lower.split(['.', ';']).filter(|clause| clause.contains("not yet")).collect();
    for word in &capabilities {
        assert!(lower.contains(word.as_str()), "Status says nothing of {word}");
        assert!(
            !not_yet.iter().any(|clause| clause.contains(word.as_str())),
            "Status calls {word} not done: {not_yet:?}"
        );
    }
}

#[test]
fn the_library_page_shows_the_example_as_it_compiles() {
    let root = repo_root();
    let page = read(&root.join("docs/library.md"));
    let example = read(&root.join("host/examples/library.rs"));
    assert!(page.contains(&format!("```rust\n{example}```")), "docs/library.md differs from host/examples/library.rs");
}

fn taskhost_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--plugins", "hello/plugins", "--database-url", "sqlite://tour.db"])
        .args(args)
        .current_dir(dir)
        .env_remove("TASKHOST_CONFIG")
        .output()
        .expect("run taskhost");
    assert!(o.status.success(), "taskhost {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// The tour's shell block, run by bash in an empty directory with this build's `taskhost` first on
/// the PATH; then each task is where the tour's comments say.
#[test]
fn the_five_minute_tour_runs_as_written() {
    let root = repo_root();
    let tour = section(&read(&root.join("README.md")), "A five-minute tour");
    let script = tour.split("```sh\n").nth(1).and_then(|s| s.split("```").next()).expect("the tour's sh block");
    assert!(script.lines().count() >= 8, "{script}");
    let bin = Path::new(env!("CARGO_BIN_EXE_taskhost")).parent().expect("the binary's folder");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let dir = tempfile::tempdir().expect("temp dir");
    let o = Command::new("bash")
        .args(["-e", "-c", script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", root.join("target/new-handlers"))
        .env_remove("TASKHOST_DATABASE_URL")
        .env_remove("TASKHOST_PLUGINS")
        .env_remove("TASKHOST_CONFIG")
        .output()
        .expect("run bash");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the tour stopped:\n{out}\n{err}");
    assert!(out.contains(r#"success: {"hello":"you"}"#), "run-once's result: {out}");
    let state = |id: &str| taskhost_json(dir.path(), &["show", id, "--json"]);
    let (first, later, replayed) = (state("1"), state("2"), state("3"));
    assert_eq!(first["task"]["state"], "succeeded", "{first}");
    assert_eq!(later["task"]["state"], "scheduled", "{later}");
    assert_eq!(replayed["task"]["state"], "succeeded", "{replayed}");
    let runs = replayed["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "a dead run and its replay: {replayed}");
    assert_eq!(runs[0]["error_code"], "invalid-input", "{replayed}");
    assert_eq!(runs[1]["results"]["hello"], "again", "{replayed}");
    let versions = taskhost_json(dir.path(), &["versions", "hello", "--json"]);
    assert_eq!(versions.as_array().map(Vec::len), Some(1), "{versions}");
    assert_eq!(versions[0]["active"], true, "{versions}");
    assert_eq!(runs[1]["component_digest"], versions[0]["digest"], "the replay ran the version deployed");
    let stats = taskhost_json(dir.path(), &["stats", "--json"]);
    assert!(stats.to_string().contains("hello"), "stats name the handler: {stats}");
}
