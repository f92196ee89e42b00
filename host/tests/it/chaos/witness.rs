//! The `witness` handler's side of the chaos test: what its runs are asked to do, and what they
//! wrote of their lives (each run's start, its signs of life every 20 ms, its end) in the
//! directories granted to each worker.

use std::collections::HashMap;
use std::path::PathBuf;

use super::partitions::SKEWS;

/// A witness task's data: one in eight outlives the heartbeat horizon, and only those can overlap
/// a retry if a fence fails.
pub fn data() -> serde_json::Value {
    let ms = match rand::random::<u64>() % 8 {
        0 => 4_000 + rand::random::<u64>() % 10_000,
        _ => 100 + rand::random::<u64>() % 500,
    };
    serde_json::json!({ "dir": "/out", "ms": ms })
}

/// A run as its guest saw it: its start and the last time it said it was running, on the real
/// clock (the worker's offset taken out), and whether it reached its end.
#[derive(Debug)]
pub struct Seen {
    pub run: i64,
    pub start: i128,
    pub last: i128,
    pub ended: bool,
}

pub fn witnessed(dirs: &[PathBuf]) -> HashMap<i64, Vec<Seen>> {
    let mut by_task: HashMap<i64, Vec<Seen>> = HashMap::new();
    for (i, dir) in dirs.iter().enumerate() {
        let offset = SKEWS[i].map_or(0, |(_, ns)| ns);
        for entry in std::fs::read_dir(dir).expect("witness dir").flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (task, run) = name.split_once('-').expect("TASK-RUN");
            let text = std::fs::read_to_string(entry.path()).expect("witness file");
            let times: Vec<(&str, i128)> = text
                .lines()
                .filter_map(|l| l.split_once(' '))
                .filter_map(|(w, t)| Some((w, t.parse::<i128>().ok()? - offset)))
                .collect();
            let Some(&(_, start)) = times.first() else { continue };
            let last = times.last().map_or(start, |&(_, t)| t);
            let ended = times.last().is_some_and(|&(w, _)| w == "end");
            let seen = Seen { run: run.parse().expect("run id"), start, last, ended };
            by_task.entry(task.parse().expect("task id")).or_default().push(seen);
        }
    }
    by_task
}
