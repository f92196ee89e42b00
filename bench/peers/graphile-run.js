#!/usr/bin/env node
// Graphile Worker's half of bench/peers/graphile.sh (not run by CI): queue N no-op jobs in one
// `graphile_worker.add_jobs` call, then drain them with P worker processes using graphile-worker's
// JS API (`run()` with a taskList), and print one JSON line:
//   {"peer":"graphile-worker","processes":P,"jobs":N,"bulk_add_per_s":X,"drain_per_s":Y,...}
//
// It reproduces the "batching" configuration of Graphile Worker's own performance test
// (graphile/worker, perfTest/graphile.config.js at v0.17.3) and its way of queueing
// (perfTest/init.js); see graphile.sh's header for what differs.
//
//   node bench/peers/graphile-run.js --url postgres://... --jobs 50000 --processes 2
//   node bench/peers/graphile-run.js --url postgres://... --migrate    (the schema only)
//
// Env: PEERS_GRAPHILE_DIR, where graphile-worker is installed (default <repo>/target/peers/graphile).
"use strict";

const path = require("path");
const { fork } = require("child_process");
const { createRequire } = require("module");

const GRAPHILE_DIR =
  process.env.PEERS_GRAPHILE_DIR || path.join(__dirname, "..", "..", "target", "peers", "graphile");
// Resolve graphile-worker (and its own `pg`) from the local install, never a global one.
const requireGw = createRequire(path.join(GRAPHILE_DIR, "package.json"));
const requirePg = createRequire(requireGw.resolve("graphile-worker"));

// perfTest's task, `log_if_999`, is a no-op in effect (one console.log for id 999).
const TASK = "log_if_999";

// perfTest/graphile.config.js (v0.17.3), the batching configuration, verbatim except the
// connection string.
const CONCURRENT_JOBS = 24;
function preset(connectionString) {
  return {
    worker: {
      connectionString,
      gracefulShutdownAbortTimeout: 2500,
      concurrentJobs: CONCURRENT_JOBS,
      maxPoolSize: CONCURRENT_JOBS + 1,
      localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  };
}

function args(argv) {
  const out = { url: process.env.PERF_DATABASE_URL, jobs: 50000, processes: 1 };
  for (let i = 0; i < argv.length; i++) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === "--url") (out.url = v), i++;
    else if (k === "--jobs") (out.jobs = parseInt(v, 10)), i++;
    else if (k === "--processes") (out.processes = parseInt(v, 10)), i++;
    else if (k === "--child") out.child = true;
    else if (k === "--migrate") out.migrate = true;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!out.url) throw new Error("--url (or PERF_DATABASE_URL) is required");
  if (!(out.jobs > 0) || !(out.processes > 0)) throw new Error("--jobs and --processes must be > 0");
  return out;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

// ---- worker process: load everything, say "ready", run() on "go", report on "stop" ----------
async function child(opts) {
  // perfTest/run.js sets this: without it every job logs a "Completed task" line.
  process.env.NO_LOG_SUCCESS = "1";
  const { run } = requireGw("graphile-worker");
  let done = 0;
  const taskList = {
    [TASK]: (payload) => {
      done++;
      if (payload.id === 999) console.log("Found 999!"); // perfTest's body; stdout goes to stderr
    },
  };
  let runner = null;
  let cpu0 = null;
  process.on("message", async (m) => {
    try {
      if (m === "go") {
        cpu0 = process.cpuUsage();
        // noHandleSignals: the parent stops us over IPC; Ctrl-C reaches the whole group anyway.
        runner = await run({ preset: preset(opts.url), taskList, noHandleSignals: true });
        process.send({ started: true });
      } else if (m === "stop") {
        const cpu = process.cpuUsage(cpu0);
        await runner.stop();
        await runner.promise.catch(() => {});
        process.send({ stopped: true, done, cpu_us: cpu.user + cpu.system }, () => process.exit(0));
      }
    } catch (e) {
      console.error(e);
      process.exit(1);
    }
  });
  process.send({ ready: true });
}

// ---- parent: schema, bulk add, drain timed until the jobs table is empty ----------------------
async function parent(opts) {
  const { Pool } = requirePg("pg");
  const { runMigrations } = requireGw("graphile-worker");
  // Read as a file: graphile-worker 0.18's "exports" does not export its package.json.
  const gwPackage = path.join(GRAPHILE_DIR, "node_modules", "graphile-worker", "package.json");
  const gwVersion = JSON.parse(require("fs").readFileSync(gwPackage, "utf8")).version;

  // Schema installed (migrations) before anything is timed, and the jobs table emptied. `--migrate`:
  // only that (graphile.sh installs it before it reads the server's counters).
  await runMigrations({ connectionString: opts.url });
  if (opts.migrate) return;
  const pool = new Pool({ connectionString: opts.url, max: 2 });
  const empty = async () => {
    await pool.query("truncate graphile_worker._private_jobs");
    await pool.query("delete from graphile_worker._private_job_queues");
  };
  await empty();

  // Bulk add exactly as perfTest/init.js: one add_jobs() call with a JSON array of job specs
  // (its 1,000,000-job slices are one slice here). Like its console.time, the timing covers
  // JSON.stringify and the statement, not building the array.
  const jobs = [];
  for (let i = 0; i < opts.jobs; i++) jobs.push({ identifier: TASK, payload: { id: i } });
  const a0 = nowMs();
  await pool.query(
    "select 1 from graphile_worker.add_jobs(array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)));",
    [JSON.stringify(jobs)],
  );
  const addMs = nowMs() - a0;
  const {
    rows: [{ n }],
  } = await pool.query("select count(*)::int as n from graphile_worker._private_jobs");
  if (n !== opts.jobs) throw new Error(`queued ${n} jobs, expected ${opts.jobs}`);

  // Worker processes are started and have loaded graphile-worker before the clock starts (node
  // start-up is not the queue's speed); run()'s own start-up (pool, migration check) is timed.
  const s0 = nowMs();
  const children = [];
  for (let i = 0; i < opts.processes; i++) {
    const c = fork(__filename, ["--child", "--url", opts.url], {
      // Worker logs and "Found 999!" to our stderr: stdout is the JSON line only.
      stdio: ["ignore", process.stderr, process.stderr, "ipc"],
    });
    c.msgs = [];
    c.waiters = [];
    c.on("message", (m) => {
      c.msgs.push(m);
      c.waiters.splice(0).forEach((w) => w());
    });
    c.on("exit", (code) => {
      c.exited = code;
      if (code !== 0 && !c.stopping) {
        console.error(`graphile-run: a worker process exited with ${code}`);
        process.exit(1);
      }
      c.waiters.splice(0).forEach((w) => w());
    });
    children.push(c);
  }
  const waitFor = async (c, key) => {
    for (;;) {
      const m = c.msgs.find((m) => m[key]);
      if (m) return m;
      await new Promise((r) => c.waiters.push(r));
    }
  };
  await Promise.all(children.map((c) => waitFor(c, "ready")));
  const spawnMs = nowMs() - s0;

  // Drain: from sending "go" until no row is left in the jobs table (a job's row is deleted when
  // its completion is committed; a failed job would stay, so the timeout catches failures).
  const d0 = nowMs();
  children.forEach((c) => c.send("go"));
  const deadline = d0 + 30 * 60 * 1000;
  let lastNote = d0;
  for (;;) {
    const {
      rows: [{ left }],
    } = await pool.query("select exists(select 1 from graphile_worker._private_jobs) as left");
    if (!left) break;
    if (nowMs() > deadline) throw new Error("the queue did not empty in 30 minutes");
    if (nowMs() - lastNote > 5000) {
      // A slow drain says why on stderr: how many rows are left, locked, retried.
      lastNote = nowMs();
      const { rows } = await pool.query(
        "select count(*)::int as left, count(locked_at)::int as locked, count(*) filter (where attempts > 0)::int as attempted, max(last_error) as err from graphile_worker._private_jobs",
      );
      console.error(`graphile-run: after ${((lastNote - d0) / 1000).toFixed(0)} s: ${JSON.stringify(rows[0])}`);
    }
    await sleep(5); // the poll's resolution; negligible against a drain of seconds
  }
  const drainMs = nowMs() - d0;

  children.forEach((c) => {
    c.stopping = true;
    c.send("stop");
  });
  const reports = await Promise.all(children.map((c) => waitFor(c, "stopped")));
  const ran = reports.reduce((s, r) => s + r.done, 0);
  const cpuUs = reports.reduce((s, r) => s + r.cpu_us, 0);
  if (ran !== opts.jobs) throw new Error(`the task ran ${ran} times for ${opts.jobs} jobs`);
  await empty();
  await pool.end();

  console.log(
    JSON.stringify({
      peer: "graphile-worker",
      version: gwVersion,
      processes: opts.processes,
      jobs: opts.jobs,
      bulk_add_per_s: Math.round((opts.jobs * 1000) / addMs),
      drain_per_s: Math.round((opts.jobs * 1000) / drainMs),
      // CPU of the worker processes (not the database server's), like taskhost's figure.
      drain_cpu_us_per_task: Math.round(cpuUs / opts.jobs),
      drain_s: +(drainMs / 1000).toFixed(3),
      worker_start_ms: Math.round(spawnMs), // node start + require, not in the drain
    }),
  );
}

const opts = args(process.argv.slice(2));
(opts.child ? child(opts) : parent(opts)).catch((e) => {
  console.error(e);
  process.exit(1);
});
