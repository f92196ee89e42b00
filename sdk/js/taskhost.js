// taskhost's JavaScript SDK: a task handler as a plain (async) function.
//
//   import { handler, progress, log, Fail, Retry, request } from "./sdk/taskhost.js";
//
//   export const handle = handler(async (task) => {
//     const response = await request(task.data.url, { method: "POST", json: task.data.payload, timeout: 10 });
//     response.raiseForStatus();            // a 5xx answer is retried, a 4xx one is not
//     progress(100);
//     return { status: response.status };
//   });
//
// - `task`: `id`, `runId` (numbers, never BigInt), `attempt` (1 for the first run), `handler`, `queuedBy`,
//   `data` (the task's JSON, parsed) and `raw` (its text).
// - Return a JSON-able value (the run's results) or undefined.
// - `throw new Fail(code, message)`: the run fails, not retried; `new Retry(code, message)`: it fails and is
//   retried (up to the task's max_attempts). Anything else thrown ends the run as `uncaught-exception`
//   (retried), its message the error and its stack: a thrown Error would otherwise trap without its text.
// - `throw new Snooze(seconds)`: not now; the task is due again after that long, this run `snoozed` (not a
//   failure, no attempt used). `response.snoozeIfBusy()` does it for a 429 or 503 after its `Retry-After`.
// - `enqueue(handler, data, {queue, priority, delay, at, uniqueKey, maxAttempts})`: queue a task, this one's child,
//   written only if this run ends well (returns or snoozes); `delay` in seconds, `at` a Date or ms since 1970.
//   `after` (numbers it returned before) and `runAnyway` make a join. Refused, it throws `Fail("enqueue-refused", why)`.
// - `dependencies()`: in a join, the tasks it runs after, with their results.
// - `awaitSignal(name, timeoutSeconds)`: wait for a signal sent to the task (`taskhost signal ID NAME --data
//   JSON`): its data once sent, null once the wait timed out; not sent yet, it throws a `Waiting` that ends
//   the run waiting (let it through a catch-all: `if (e instanceof Waiting) throw e`).
// - `progress(percent)`, `partial(results)`, `log.info(...)` (and `debug`, `warning`, `error`); console.log
//   lands in the run's logs too.
// - `request(url, {method, json, body, headers, timeout})`: `fetch` (wasi:http, sent where the operator's
//   grant for this handler allows) with a timeout in seconds, the whole body read, failures as errors in
//   the handler's terms (`request-timeout`, `request-failed`; a refused destination's run gets the host's
//   `denied`), `raiseForStatus()` (`http-5xx`, retried; `http-4xx`, not, but 408 and 429) and `snoozeIfBusy()`.
//   `fetch` itself works too.
// - Under `taskhost dev`, an edit of the handler's own .js files runs without a build: dev builds with
//   TASKHOST_DEV=1, and build.sh then builds dev.js (this SDK, taskhost_live.js and app.js) against the world
//   in js.wit; a worker's build (`sh build.sh`) is app.js against `task-handler`, without that part.
import {
  setProgress, setResults, log as hostLog, snooze as hostSnooze, enqueue as hostEnqueue, enqueueAfter as hostEnqueueAfter,
  dependencies as hostDependencies, awaitSignal as hostAwaitSignal,
} from "taskhost:plugin/host@0.2.0";
import * as sdk from "./taskhost.js";

// Busy answers without a Retry-After are tried again after this many seconds; a server's longer
// Retry-After is cut to the longest snooze the host takes (30 days).
const BUSY_SECONDS = 10;
const LONGEST_SNOOZE = 30 * 24 * 3600;

/** A failure the handler knows about: a short `code`, a `message`, and whether retrying can help. */
export class TaskError extends Error {
  constructor(code, message = "", retryable = false) {
    super(message ? `${code}: ${message}` : String(code));
    this.code = String(code);
    this.detail = String(message);
    this.retryable = Boolean(retryable);
  }
}

/** The run fails for good: retrying cannot help. */
export class Fail extends TaskError {
  constructor(code, message = "") {
    super(code, message, false);
  }
}

/** The run fails and the task is tried again later. */
export class Retry extends TaskError {
  constructor(code, message = "") {
    super(code, message, true);
  }
}

/** Not now: the task is due again after `seconds` (at most 30 days); the run ends `snoozed`. */
export class Snooze extends Error {
  constructor(seconds) {
    super(`snooze for ${seconds} s`);
    this.seconds = Math.max(0, Number(seconds) || 0);
  }
}

/** Seconds a `Retry-After` asks for: a number of seconds, or an HTTP date from now. */
function retryAfter(value) {
  if (!value) return BUSY_SECONDS;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isNaN(at) ? BUSY_SECONDS : Math.max(0, (at - Date.now()) / 1000);
}

/** A 4xx or 5xx answer, from `raiseForStatus()`; `response` is the answer. */
export class HTTPError extends TaskError {
  constructor(response) {
    const s = response.status;
    super(s >= 500 ? "http-5xx" : "http-4xx", `${response.method} ${response.url} answered ${s}: ${response.text.slice(0, 500)}`,
      s >= 500 || s === 408 || s === 429);
    this.response = response;
  }
}

/** Queue a task for `handler` with `data`, this task's child, written only if this run ends well; its number. */
/** `after`: numbers returned for tasks this run queued before, which it waits for (a join); one dead or
 * cancelled cancels it, unless `runAnyway`. */
export function enqueue(handler, data, { queue, priority, delay, at, uniqueKey, maxAttempts, after, runAnyway } = {}) {
  let due;
  if (delay !== undefined) due = { tag: "after-ms", val: BigInt(Math.max(0, Math.trunc(Number(delay) * 1000))) };
  else if (at !== undefined) due = { tag: "at-ms", val: BigInt(Math.trunc(at instanceof Date ? at.getTime() : Number(at))) };
  try {
    const task = { handler: String(handler), data: JSON.stringify(data), queue, priority, due, uniqueKey, maxAttempts };
    if ((after && after.length) || runAnyway) return hostEnqueueAfter(task, Array.from(after || [], Number), Boolean(runAnyway));
    return hostEnqueue(task);
  } catch (e) {
    throw new Fail("enqueue-refused", String(e && e.payload !== undefined ? e.payload : e));
  }
}

/** In a join, the tasks it runs after, in the order of their ids (a run's tasks: the order queued):
 * `{id, handler, succeeded, results, resultsLeftOut}`, results parsed (null: none, or left out past this
 * handler's results limit). Unreadable, throws `Retry("dependencies-unread", why)`. */
export function dependencies() {
  let found;
  try {
    found = hostDependencies();
  } catch (e) {
    throw new Retry("dependencies-unread", String(e && e.payload !== undefined ? e.payload : e));
  }
  return found.map((d) => ({
    id: id(d.taskId), handler: d.handler, succeeded: d.succeeded,
    results: d.results === undefined || d.results === null ? null : JSON.parse(d.results), resultsLeftOut: d.resultsLeftOut,
  }));
}

/** Thrown by `awaitSignal` for a signal not sent yet: the run ends waiting for it (not a failure). */
export class Waiting extends Error {
  constructor(name) {
    super(`waiting for the signal ${JSON.stringify(name)}`);
    this.signal = name;
  }
}

/** Wait for the signal `name` sent to this task, for at most `timeoutSeconds` (1 s to 30 days) from the
 * wait's start: its data, parsed, once sent; null once the wait timed out. Not sent yet, throws `Waiting`,
 * which ends this run waiting: the task runs again when the signal is sent, or at the timeout, and this
 * call then answers. A refused wait throws `Fail("invalid-signal-wait", why)`; the database unread,
 * `Retry("signal-unread", why)`. */
export function awaitSignal(name, timeoutSeconds) {
  let found;
  try {
    found = hostAwaitSignal(String(name), BigInt(Math.max(0, Math.trunc(Number(timeoutSeconds) * 1000) || 0)));
  } catch (e) {
    const why = String(e && e.payload !== undefined ? e.payload : e);
    throw why.includes("could not be looked up") ? new Retry("signal-unread", why) : new Fail("invalid-signal-wait", why);
  }
  if (found.tag === "delivered") return JSON.parse(found.val);
  if (found.tag === "timed-out") return null;
  throw new Waiting(String(name));
}

/** Report progress, 0 to 100 percent. */
export function progress(percent) {
  setProgress(Math.max(0, Math.min(100, Math.trunc(Number(percent) || 0))));
}

/** Store partial results (any JSON-able value) on the run, replacing earlier ones. */
export function partial(results) {
  try {
    setResults(JSON.stringify(results));
  } catch (e) {
    throw new Error(`partial results refused: ${e && e.payload !== undefined ? e.payload : e}`);
  }
}

/** Log lines, stored with the run (past the handler's log limit they are dropped). */
export const log = {
  debug: (message) => hostLog("debug", String(message)),
  info: (message) => hostLog("info", String(message)),
  warning: (message) => hostLog("warn", String(message)),
  warn: (message) => hostLog("warn", String(message)),
  error: (message) => hostLog("error", String(message)),
};

/** Send a request and read the whole answer: `{status, ok, headers, text, json(), raiseForStatus(), snoozeIfBusy()}`. */
export async function request(url, { method, json, body, headers = {}, timeout = 30 } = {}) {
  method = (method || (json !== undefined || body !== undefined ? "POST" : "GET")).toUpperCase();
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
    throw new TaskError("request-failed", `${method} ${url}: not an http:// or https:// URL`, false);
  }
  const sent = { ...headers };
  if (json !== undefined) {
    body = JSON.stringify(json);
    sent["content-type"] = "application/json";
  }
  let timer;
  const late = new Promise((_, reject) => {
    if (timeout != null) {
      timer = setTimeout(() => reject(new TaskError("request-timeout", `${method} ${url}: no answer within ${timeout} s`, true)), timeout * 1000);
    }
  });
  try {
    const answer = await Promise.race([(async () => {
      let r;
      try {
        r = await fetch(url, { method, headers: sent, body });
      } catch (e) {
        throw new TaskError("request-failed", `${method} ${url}: ${e && e.message ? e.message : e}`, true);
      }
      let text;
      try {
        text = await r.text();
      } catch (e) {
        throw new TaskError("request-failed", `${method} ${url}: reading the response: ${e && e.message ? e.message : e}`, true);
      }
      return { r, text };
    })(), late]);
    const { r, text } = answer;
    const response = {
      method, url, status: r.status, ok: r.ok, headers: r.headers, text,
      json: () => JSON.parse(text),
      raiseForStatus() {
        if (r.status >= 400) throw new HTTPError(response);
      },
      snoozeIfBusy() {
        if (r.status === 429 || r.status === 503) {
          throw new Snooze(Math.min(retryAfter(r.headers.get("retry-after")), LONGEST_SNOOZE));
        }
        return response;
      },
    };
    return response;
  } finally {
    clearTimeout(timer);
  }
}

function id(n) {
  // Ids are s64 in the WIT, so BigInt here; a number while it is exact, else its text.
  return typeof n === "bigint" ? (n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : String(n)) : n;
}

/** The `handle` export for `fn(task)`: `export const handle = handler(async (task) => ...)`. Under
 * `taskhost dev`, the handler's source as it is now runs instead (taskhost_live.js). */
export function handler(fn) {
  return wrap(fn, true);
}

// taskhost_live.js's reader of the lent source, installed by dev.js (a build for `taskhost dev`); a
// worker's build has none.
let liveHandle;

/** For dev.js: runs of task 0 look for a lent source with `reader` (taskhost_live.js's liveHandle). */
export function readLentSource(reader) {
  liveHandle = reader;
}

/** What a run's thrown `e` ends it as, when the handler did not say. */
function uncaught(e) {
  return { code: "uncaught-exception", message: e && e.stack ? `${e}\n${e.stack}` : String(e), retryable: true };
}

function wrap(fn, live) {
  return async function handle(raw) {
    // Only `taskhost dev` and `run-once` run task 0; a queued task does not look.
    if (live && liveHandle && (raw.taskId === 0n || raw.taskId === 0)) {
      let current;
      try {
        // The lent source's modules get this SDK, whose handler() there does not look again.
        current = liveHandle({ ...sdk, handler: (f) => wrap(f, false) });
      } catch (e) {
        throw e && typeof e.code === "string" ? e : uncaught(e);
      }
      if (current) return current(raw);
    }
    const task = {
      id: id(raw.taskId), runId: id(raw.runId), attempt: raw.attempt, handler: raw.handler,
      queuedBy: raw.queuedBy, raw: raw.data, data: JSON.parse(raw.data),
    };
    let results;
    try {
      results = await fn(task);
    } catch (e) {
      // The host holds the wait `awaitSignal` began: the run ends waiting.
      if (e instanceof Waiting) return undefined;
      if (e instanceof Snooze) {
        try {
          hostSnooze(BigInt(Math.min(Math.trunc(e.seconds * 1000), Number.MAX_SAFE_INTEGER)));
        } catch (refused) {
          throw { code: "invalid-snooze", message: String(refused && refused.payload !== undefined ? refused.payload : refused), retryable: false };
        }
        return undefined;
      }
      if (e instanceof TaskError) throw { code: e.code, message: e.detail, retryable: e.retryable };
      // A thrown {code, message, retryable}, as handlers without the SDK throw it.
      if (e && typeof e.code === "string" && typeof e.message === "string") throw e;
      throw uncaught(e);
    }
    if (results === undefined) return undefined;
    try {
      return JSON.stringify(results);
    } catch (e) {
      throw { code: "invalid-result", message: `handle returned what is not JSON: ${e}`, retryable: false };
    }
  };
}

// SpiderMonkey compiles a function to bytecode at its first call, and every run starts from the
// component as it was made: the wrapper called once now, when it is made, spares each run that.
wrap(() => undefined, false)({ taskId: 0n, runId: 0n, attempt: 1, handler: "", data: "{}" });
