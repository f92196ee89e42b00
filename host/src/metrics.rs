//! Prometheus metrics of this process: counters and histograms kept in memory, written in the
//! text exposition format by [`Metrics::render`]. `taskhost serve` answers them at `/metrics`
//! with gauges read from the database at each scrape (see `api::metrics`); a worker does with
//! `--metrics ADDR`.
//!
//! Label values come from task submitters (queue names) and plugin names, so a metric keeps at
//! most [`MAX_SERIES`] label sets: later ones are counted under the value `_other`, and a
//! hostile queue name cannot grow this process's memory without bound.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};

/// Label sets one metric keeps at most.
pub const MAX_SERIES: usize = 1000;

/// A counter this process keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Counter {
    /// Tasks queued by this process (`queue`).
    TasksAdded,
    /// Runs a worker started (`handler`, `queue`).
    RunsStarted,
    /// Runs a worker ended (`handler`, `queue`, `outcome`: a run status, `put-back` or `stopped`).
    RunsEnded,
    /// Plugin files loaded (`outcome`: `ok` or `refused`; `source`: `cache` or `compiled`).
    PluginLoads,
}

/// A histogram this process keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Histogram {
    /// Seconds a run took (`handler`, `queue`).
    RunDuration,
    /// Seconds from when a run was due to when it started (`handler`, `queue`).
    RunWait,
    /// Fuel a run burned (`handler`).
    RunFuel,
    /// Seconds a plugin took to compile.
    CompileTime,
}

impl Counter {
    fn name(self) -> &'static str {
        match self {
            Counter::TasksAdded => "taskhost_tasks_added_total",
            Counter::RunsStarted => "taskhost_runs_started_total",
            Counter::RunsEnded => "taskhost_runs_total",
            Counter::PluginLoads => "taskhost_plugin_loads_total",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Counter::TasksAdded => "Tasks queued by this process.",
            Counter::RunsStarted => "Runs this process started.",
            Counter::RunsEnded => "Runs this process ended, by outcome.",
            Counter::PluginLoads => "Plugin files loaded, by outcome and source.",
        }
    }
}

impl Histogram {
    fn name(self) -> &'static str {
        match self {
            Histogram::RunDuration => "taskhost_run_duration_seconds",
            Histogram::RunWait => "taskhost_run_wait_seconds",
            Histogram::RunFuel => "taskhost_run_fuel",
            Histogram::CompileTime => "taskhost_plugin_compile_seconds",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Histogram::RunDuration => "Seconds a run took.",
            Histogram::RunWait => "Seconds from when a run was due to when it started.",
            Histogram::RunFuel => "Fuel a run burned.",
            Histogram::CompileTime => "Seconds a plugin took to compile.",
        }
    }

    fn bounds(self) -> &'static [f64] {
        const SECONDS: [f64; 14] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0];
        const COMPILE: [f64; 8] = [0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0];
        const FUEL: [f64; 8] = [1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11];
        match self {
            Histogram::RunDuration | Histogram::RunWait => &SECONDS,
            Histogram::RunFuel => &FUEL,
            Histogram::CompileTime => &COMPILE,
        }
    }
}

/// A series's labels, in order.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Default, Clone)]
struct Buckets {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug, Default)]
struct Inner {
    counters: BTreeMap<Counter, BTreeMap<Series, u64>>,
    histograms: BTreeMap<Histogram, BTreeMap<Series, Buckets>>,
}

/// A label set as a metric keeps it. A series already kept is found by the labels as given,
/// compared pair by pair ([`Pairs`]), without copying them: every run counts five times.
#[derive(Debug)]
struct Series(Labels);

/// Labels compared pair by pair, kept ([`Series`]) or given ([`Given`]) alike.
trait Pairs {
    fn pair(&self, i: usize) -> Option<(&str, &str)>;
}

struct Given<'a>(&'a [(&'static str, &'a str)]);

impl Pairs for Series {
    fn pair(&self, i: usize) -> Option<(&str, &str)> {
        self.0.get(i).map(|(k, v)| (*k, v.as_str()))
    }
}

impl Pairs for Given<'_> {
    fn pair(&self, i: usize) -> Option<(&str, &str)> {
        self.0.get(i).copied()
    }
}

impl Ord for dyn Pairs + '_ {
    /// As tuples of their pairs: the first differing pair decides, a set that ends first is less.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (0..)
            .map(|i| (self.pair(i), other.pair(i)))
            .find(|(a, b)| a != b || a.is_none())
            .map_or(std::cmp::Ordering::Equal, |(a, b)| a.cmp(&b))
    }
}

impl PartialOrd for dyn Pairs + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn Pairs + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for dyn Pairs + '_ {}

impl Ord for Series {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self as &dyn Pairs).cmp(other)
    }
}

impl PartialOrd for Series {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Series {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Series {}

impl<'a> std::borrow::Borrow<dyn Pairs + 'a> for Series {
    fn borrow(&self) -> &(dyn Pairs + 'a) {
        self
    }
}

/// The metrics of one process.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// This process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

/// `f` applied to the series `labels` count in, made if need be: as given, or every value
/// `_other` once the metric has [`MAX_SERIES`] sets.
fn in_series<V: Default>(map: &mut BTreeMap<Series, V>, labels: &[(&'static str, &str)], f: impl FnOnce(&mut V)) {
    if let Some(kept) = map.get_mut(&Given(labels) as &dyn Pairs) {
        return f(kept);
    }
    let key = if map.len() < MAX_SERIES {
        Series(labels.iter().map(|(k, v)| (*k, v.to_string())).collect())
    } else {
        Series(labels.iter().map(|(k, _)| (*k, "_other".to_string())).collect())
    };
    f(map.entry(key).or_default())
}

impl Metrics {
    /// Add `by` to `counter` with these labels.
    pub fn add(&self, counter: Counter, labels: &[(&'static str, &str)], by: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        in_series(inner.counters.entry(counter).or_default(), labels, |n| *n += by);
    }

    /// Count `value` in `histogram` with these labels.
    pub fn observe(&self, histogram: Histogram, labels: &[(&'static str, &str)], value: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let bounds = histogram.bounds();
        in_series(inner.histograms.entry(histogram).or_default(), labels, |b| {
            b.counts.resize(bounds.len(), 0);
            for (i, bound) in bounds.iter().enumerate() {
                if value <= *bound {
                    b.counts[i] += 1;
                }
            }
            b.sum += value;
            b.count += 1;
        });
    }

    /// Every counter and histogram in the text exposition format (version 0.0.4).
    pub fn render(&self, out: &mut String) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (counter, map) in &inner.counters {
            let _ = writeln!(out, "# HELP {} {}\n# TYPE {} counter", counter.name(), counter.help(), counter.name());
            for (Series(labels), n) in map {
                let _ = writeln!(out, "{}{} {n}", counter.name(), label_text(labels, None));
            }
        }
        for (histogram, map) in &inner.histograms {
            let name = histogram.name();
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} histogram", histogram.help());
            for (Series(labels), b) in map {
                for (bound, n) in histogram.bounds().iter().zip(&b.counts) {
                    let _ = writeln!(out, "{name}_bucket{} {n}", label_text(labels, Some(&bound.to_string())));
                }
                let _ = writeln!(out, "{name}_bucket{} {}", label_text(labels, Some("+Inf")), b.count);
                let _ = writeln!(out, "{name}_sum{} {}", label_text(labels, None), b.sum);
                let _ = writeln!(out, "{name}_count{} {}", label_text(labels, None), b.count);
            }
        }
    }
}

/// One gauge with its help, type and samples, for values read at a scrape.
pub fn render_gauge(out: &mut String, name: &str, help: &str, samples: &[(Labels, f64)]) {
    render_samples(out, name, help, "gauge", samples);
}

/// A counter read from elsewhere (the database), in the text format, as [`render_gauge`].
pub fn render_counter(out: &mut String, name: &str, help: &str, samples: &[(Labels, f64)]) {
    render_samples(out, name, help, "counter", samples);
}

fn render_samples(out: &mut String, name: &str, help: &str, kind: &str, samples: &[(Labels, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{} {value}", label_text(labels, None));
    }
}

/// `{a="x",b="y"}` (with `le` last for a bucket), values escaped; empty without labels.
fn label_text(labels: &[(&'static str, String)], le: Option<&str>) -> String {
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("{{{}}}", parts.join(","))
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_are_written_in_the_text_format() {
        let m = Metrics::default();
        m.add(Counter::RunsEnded, &[("handler", "echo"), ("queue", "a\"b"), ("outcome", "success")], 2);
        m.observe(Histogram::RunDuration, &[("handler", "echo"), ("queue", "q")], 0.03);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("# TYPE taskhost_runs_total counter\n"), "{out}");
        assert!(
            out.contains("taskhost_runs_total{handler=\"echo\",queue=\"a\\\"b\",outcome=\"success\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("taskhost_run_duration_seconds_bucket{handler=\"echo\",queue=\"q\",le=\"0.025\"} 0\n"));
        assert!(out.contains("taskhost_run_duration_seconds_bucket{handler=\"echo\",queue=\"q\",le=\"0.05\"} 1\n"));
        assert!(out.contains("taskhost_run_duration_seconds_bucket{handler=\"echo\",queue=\"q\",le=\"+Inf\"} 1\n"));
        assert!(out.contains("taskhost_run_duration_seconds_count{handler=\"echo\",queue=\"q\"} 1\n"), "{out}");
    }

    #[test]
    fn a_metric_keeps_a_bounded_number_of_label_sets() {
        let m = Metrics::default();
        for i in 0..MAX_SERIES + 50 {
            m.add(Counter::TasksAdded, &[("queue", &format!("q{i}"))], 1);
        }
        let mut out = String::new();
        m.render(&mut out);
        assert_eq!(out.lines().filter(|l| l.starts_with("taskhost_tasks_added_total{")).count(), MAX_SERIES + 1);
        assert!(out.contains("taskhost_tasks_added_total{queue=\"_other\"} 50\n"), "{out}");
    }

    #[test]
    fn a_kept_series_is_found_by_its_labels_as_given_even_when_the_metric_is_full() {
        let m = Metrics::default();
        for i in 0..MAX_SERIES {
            m.add(Counter::TasksAdded, &[("queue", &format!("q{i}"))], 1);
        }
        m.add(Counter::TasksAdded, &[("queue", "q7")], 1);
        m.add(Counter::TasksAdded, &[("queue", "new")], 1);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("taskhost_tasks_added_total{queue=\"q7\"} 2\n"), "{out}");
        assert!(out.contains("taskhost_tasks_added_total{queue=\"_other\"} 1\n"), "{out}");
        let kept = Series(vec![("queue", "q".to_string())]);
        let (given, longer) = (Given(&[("queue", "q")]), Given(&[("queue", "q"), ("handler", "h")]));
        assert!((&kept as &dyn Pairs) == (&given as &dyn Pairs), "kept and given compare as their pairs");
        assert!((&given as &dyn Pairs) < (&longer as &dyn Pairs), "a set that ends first is less");
    }
}
