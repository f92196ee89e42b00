#!/usr/bin/env node
// bench/peers/graphile.sh's tables: reads the results it wrote (one JSON line a run:
// {"config","label","rep","side":"graphile"|"taskhost","version"(graphile's),"result":{...},
// "server":{"cpu_us_per_job","wal_bytes_per_job"}}) and prints markdown tables, one row per
// configuration, repetition and graphile-worker version, then the medians, with the ratios
// taskhost / graphile for drain and bulk add, and each side's server CPU and WAL a job.
"use strict";

const fs = require("fs");

const file = process.argv[2];
const runs = fs
  .readFileSync(file, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));

// A run's figures with its server's beside them.
const figures = (r) => ({ ...r.result, server_cpu: (r.server || {}).cpu_us_per_job, wal: (r.server || {}).wal_bytes_per_job });

// A group per (config, rep), in the order the runs happened: taskhost's run and graphile's by version.
const groups = new Map();
const versions = [];
for (const r of runs) {
  const key = `${r.config}\u0000${r.rep}`;
  if (!groups.has(key)) groups.set(key, { config: r.config, label: r.label, rep: r.rep, with: r.with, graphile: {} });
  const g = groups.get(key);
  if (r.side === "graphile") {
    const v = r.version || r.result.version || "?";
    if (!versions.includes(v)) versions.push(v);
    g.graphile[v] = figures(r);
  } else g.taskhost = figures(r);
}
// A taskhost-only configuration (the defaults) is compared with graphile's runs of the group it
// names in `with` (same repetition): graphile's figures are then repeated, not measured again.
for (const g of groups.values()) {
  if (!Object.keys(g.graphile).length && g.with) {
    const other = groups.get(`${g.with}\u0000${g.rep}`);
    if (other) (g.graphile = other.graphile), (g.borrowed = true);
  }
}

const num = (x) => (typeof x === "number" && isFinite(x) ? x : null);
const fmt = (x) => (num(x) === null ? "—" : Math.round(x).toLocaleString("en-US"));
const ratio = (a, b) => (num(a) === null || !num(b) ? null : a / b);
const fmtRatio = (x) => (x === null ? "—" : `${x.toFixed(2)}×`);
const median = (xs) => {
  const v = xs.filter((x) => num(x) !== null).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

const header = (first) =>
  `| configuration | ${first} | graphile | graphile drain/s | taskhost drain/s | drain ratio | graphile bulk add/s | taskhost bulk add/s | bulk add ratio | worker CPU µs/job graphile | taskhost | server CPU µs/job graphile | taskhost | WAL bytes/job graphile | taskhost |\n` +
  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
// One line; `f(side, key)` gives a figure (a median for the medians' table), `r(key)` a ratio.
const line = (label, rep, v, f, r, star) =>
  `| ${label} | ${rep} | ${v} | ${fmt(f("g", "drain_per_s"))}${star} | ${fmt(f("t", "drain_per_s"))} | ${fmtRatio(r("drain_per_s"))} | ` +
  `${fmt(f("g", "bulk_add_per_s"))}${star} | ${fmt(f("t", "bulk_add_per_s"))} | ${fmtRatio(r("bulk_add_per_s"))} | ` +
  `${fmt(f("g", "drain_cpu_us_per_task"))}${star} | ${fmt(f("t", "drain_cpu_us_per_task"))} | ` +
  `${fmt(f("g", "server_cpu"))}${star} | ${fmt(f("t", "server_cpu"))} | ${fmt(f("g", "wal"))}${star} | ${fmt(f("t", "wal"))} |`;

console.log(header("rep"));
for (const g of groups.values()) {
  for (const v of versions) {
    const side = { g: g.graphile[v] || {}, t: g.taskhost || {} };
    const f = (s, k) => side[s][k];
    const r = (k) => ratio(side.t[k], side.g[k]);
    console.log(line(g.label, g.rep, v, f, r, g.borrowed ? " *" : ""));
  }
}

console.log("\nMedians over the repetitions (ratios are the medians of the per-repetition ratios):\n");
console.log(header("reps"));
const byConfig = new Map();
for (const g of groups.values()) {
  if (!byConfig.has(g.config)) byConfig.set(g.config, []);
  byConfig.get(g.config).push(g);
}
for (const list of byConfig.values()) {
  for (const v of versions) {
    const side = (g, s) => (s === "g" ? g.graphile[v] : g.taskhost) || {};
    const f = (s, k) => median(list.map((g) => side(g, s)[k]));
    const r = (k) => median(list.map((g) => ratio(side(g, "t")[k], side(g, "g")[k])));
    console.log(line(list[0].label, list.length, v, f, r, list.some((g) => g.borrowed) ? " *" : ""));
  }
}
if ([...groups.values()].some((g) => g.borrowed)) {
  console.log("\n\\* graphile's figures of the same repetition's 1-process runs (taskhost-only configuration).");
}
if ([...groups.values()].some((g) => !g.taskhost)) {
  console.log("\n— : not measured (taskhost binary missing, the server not on this machine, or the run failed: see the log).");
}
console.log(
  "\nServer CPU and WAL a job are over the whole run (bulk add, drain, clean-up): the postmaster's processes from /proc, and pg_current_wal_lsn().",
);
