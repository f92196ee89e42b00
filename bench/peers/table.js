#!/usr/bin/env node
// bench/peers/graphile.sh's table: reads the results it wrote (one JSON line a run:
// {"config","label","rep","side":"graphile"|"taskhost","result":{...}}) and prints a markdown
// table, one row per configuration and repetition, then the medians per configuration, with the
// ratios taskhost / graphile for drain and bulk add.
"use strict";

const fs = require("fs");

const file = process.argv[2];
const runs = fs
  .readFileSync(file, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l));

// A row per (config, rep), in the order the runs happened.
const rows = new Map();
for (const r of runs) {
  const key = `${r.config}\u0000${r.rep}`;
  if (!rows.has(key)) rows.set(key, { config: r.config, label: r.label, rep: r.rep, with: r.with });
  rows.get(key)[r.side] = r.result;
}
// A taskhost-only configuration (the defaults) is compared with graphile's row it names in
// `with` (same repetition): graphile's figures are then repeated, not measured again.
for (const row of rows.values()) {
  if (!row.graphile && row.with) {
    const other = rows.get(`${row.with}\u0000${row.rep}`);
    if (other && other.graphile) (row.graphile = other.graphile), (row.borrowed = true);
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

const header =
  "| configuration | rep | graphile drain/s | taskhost drain/s | drain ratio | graphile bulk add/s | taskhost bulk add/s | bulk add ratio | CPU µs/job graphile | CPU µs/task taskhost |\n" +
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|";
const line = (label, rep, g, t, star) =>
  `| ${label} | ${rep} | ${fmt(g.drain_per_s)}${star} | ${fmt(t.drain_per_s)} | ${fmtRatio(
    ratio(t.drain_per_s, g.drain_per_s),
  )} | ${fmt(g.bulk_add_per_s)}${star} | ${fmt(t.bulk_add_per_s)} | ${fmtRatio(
    ratio(t.bulk_add_per_s, g.bulk_add_per_s),
  )} | ${fmt(g.drain_cpu_us_per_task)}${star} | ${fmt(t.drain_cpu_us_per_task)} |`;

console.log(header);
for (const row of rows.values()) {
  console.log(line(row.label, row.rep, row.graphile || {}, row.taskhost || {}, row.borrowed ? " *" : ""));
}

console.log("\nMedians over the repetitions (ratios are the medians of the per-repetition ratios):\n");
console.log(header.replace("| rep |", "| reps |"));
const byConfig = new Map();
for (const row of rows.values()) {
  if (!byConfig.has(row.config)) byConfig.set(row.config, []);
  byConfig.get(row.config).push(row);
}
for (const list of byConfig.values()) {
  const g = (k) => median(list.map((r) => (r.graphile || {})[k]));
  const t = (k) => median(list.map((r) => (r.taskhost || {})[k]));
  const rat = (k) => median(list.map((r) => ratio((r.taskhost || {})[k], (r.graphile || {})[k])));
  const star = list.some((r) => r.borrowed) ? " *" : "";
  console.log(
    `| ${list[0].label} | ${list.length} | ${fmt(g("drain_per_s"))}${star} | ${fmt(t("drain_per_s"))} | ${fmtRatio(
      rat("drain_per_s"),
    )} | ${fmt(g("bulk_add_per_s"))}${star} | ${fmt(t("bulk_add_per_s"))} | ${fmtRatio(
      rat("bulk_add_per_s"),
    )} | ${fmt(g("drain_cpu_us_per_task"))}${star} | ${fmt(t("drain_cpu_us_per_task"))} |`,
  );
}
if ([...rows.values()].some((r) => r.borrowed)) {
  console.log("\n\\* graphile's figures of the same repetition's 1-process row (taskhost-only configuration).");
}
if ([...rows.values()].some((r) => !r.taskhost)) {
  console.log("\n— : not measured (taskhost binary missing, or the run failed: see the log).");
}
