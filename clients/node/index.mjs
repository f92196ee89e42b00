// A client for taskhost's HTTP API (`taskhost serve`) over the platform's `fetch` (Node.js 18+,
// Deno, Bun, browsers); no dependencies. Types: index.d.ts. The event stream: events.mjs.

import { EventStream, passing, pauseFor, unreachable } from "./events.mjs";

export { EventStream };

/** States a task does not leave unless someone replays it. */
export const FINAL_STATES = Object.freeze(["succeeded", "dead", "cancelled"]);

/** The fields of a task to queue, as the API's `TaskInput` names them. */
export const TASK_FIELDS = Object.freeze([
  "handler", "data", "queue", "priority", "max_attempts", "key", "unique_key", "unique_for",
  "unique_states", "queued_by", "at", "run_timeout", "after", "run_anyway", "version",
]);

/** The longest one `?wait=` the server takes, in milliseconds. */
const MAX_WAIT_MS = 60_000;
// A wait's request is given up on this long after its deadline when the server has not answered.
const WAIT_GRACE_MS = 2_000;

/** An error answer of the API: `status`, `code` (stable), `message`. */
export class TaskhostError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.name = "TaskhostError";
    this.status = status;
    this.code = code;
    this.detail = message;
  }
}

/** A wait that ran out; `task`: the task as it was. */
export class WaitTimeoutError extends Error {
  constructor(id, task, timeoutMs) {
    super(`task ${id} is still ${task.task.state} after ${timeoutMs} ms`);
    this.name = "WaitTimeoutError";
    this.task = task;
  }
}

export class Client {
  /**
   * @param {string} baseUrl e.g. "http://127.0.0.1:8080"
   * @param {{token?: string, timeoutMs?: number}} [options]
   */
  constructor(baseUrl = "http://127.0.0.1:8080", options = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    // Refused here, without its text: fetch would refuse the header at each call, as unreachable.
    if (options.token != null && (typeof options.token !== "string" || /[\r\n\0]/.test(options.token))) {
      throw new TypeError("the token is not text a header can carry (a line break or NUL in it?)");
    }
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Queue one task; its id (that of the task holding its unique key, when one does). */
  async enqueue(handler, data, fields = {}) {
    const added = await this.#call("POST", "/tasks", task({ ...fields, handler, data }));
    return added.id;
  }

  /**
   * Queue one task unless a task holds `uniqueKey` (`unique_for` and `unique_states` say for how
   * long and in which states): `{ id, created }`, `created` false when a task held the key and
   * `id` is that task's.
   */
  async enqueueUnique(handler, data, uniqueKey, fields = {}) {
    if (typeof uniqueKey !== "string") throw new TypeError(`enqueueUnique: uniqueKey must be a string, not ${typeof uniqueKey}`);
    if ("unique_key" in fields) throw new TypeError("enqueueUnique: the unique key is its third argument, not a field");
    const added = await this.#call("POST", "/tasks", task({ ...fields, handler, data, unique_key: uniqueKey }));
    return { id: added.id, created: Boolean(added.created) };
  }

  /** Queue up to 10,000 tasks at once, all or none; their ids in order. */
  async enqueueMany(tasks) {
    return (await this.enqueueManyUnique(tasks)).map((queued) => queued.id);
  }

  /** As `enqueueMany`, telling for each task whether this call queued it (false: a task held its `unique_key`). */
  async enqueueManyUnique(tasks) {
    const added = await this.#call("POST", "/tasks", { tasks: tasks.map(task) });
    return added.tasks.map((a) => ({ id: a.id, created: Boolean(a.created) }));
  }

  /** The task (`task`, with its `state`) and its `runs`. */
  async get(id) {
    return this.#call("GET", `/tasks/${taskId(id)}`);
  }

  /**
   * The task once final, through `?wait=` (no polling); `timeoutMs` null: no end. A server that
   * holds as many waits as it may (503 `busy`) is asked again, a moment later each time, while
   * the time lasts (the task read meanwhile without `?wait=`). One that cannot be reached or
   * answers 502, 503 or 504 (`serve` restarting: it answers its waits as it stops) is asked again
   * while the time lasts (a minute from the last answer without a timeout), a quarter second then
   * each second, and its last error thrown when it runs out. `signal`: an `AbortSignal` that ends
   * the wait (an HTTP request whose client went away), rejecting with its reason.
   */
  async wait(id, { timeoutMs = 60_000, signal } = {}) {
    signal?.throwIfAborted();
    if (timeoutMs != null && !(timeoutMs >= 0)) throw new RangeError(`wait(timeoutMs: ${timeoutMs}): milliseconds, at least 0 (null: no end)`);
    taskId(id);
    const deadline = timeoutMs == null ? null : Date.now() + timeoutMs;
    let [pause, goneUntil, away, plain] = [100, null, 250, false];
    for (;;) {
      const left = deadline == null ? MAX_WAIT_MS : deadline - Date.now();
      const waitMs = Math.max(0, Math.min(Math.floor(left), MAX_WAIT_MS));
      // The ask that reaches the deadline is given up on soon after it if the server takes it
      // and never answers, not a whole request timeout after it.
      const last = deadline != null && left <= MAX_WAIT_MS;
      const limit = plain ? this.timeoutMs : waitMs + (last ? Math.min(this.timeoutMs, WAIT_GRACE_MS) : this.timeoutMs);
      let shown;
      try {
        shown = await this.#call("GET", `/tasks/${taskId(id)}${plain ? "" : `?wait=${waitMs}ms`}`, undefined, limit, signal);
      } catch (e) {
        if (!(e instanceof TaskhostError)) throw e;
        // A busy server still answers a plain read: the task is read so meanwhile.
        if (e.code === "busy" && !plain) {
          plain = true;
          continue;
        }
        if (!passing(e) || e.code === "busy") throw e;
        goneUntil ??= deadline ?? Date.now() + MAX_WAIT_MS;
        if (Date.now() >= goneUntil) throw e;
        await pauseFor(Math.min(away, goneUntil - Date.now()), signal);
        away = 1_000;
        continue;
      }
      [goneUntil, away] = [null, 250];
      if (FINAL_STATES.includes(shown.task.state)) return shown;
      if (plain) {
        plain = false;
        const sleep = deadline == null ? pause : Math.max(0, Math.min(pause, deadline - Date.now()));
        await pauseFor(sleep, signal);
        pause = Math.min(pause * 2, 2_000);
        if (deadline == null || Date.now() < deadline) continue;
      }
      if (deadline != null && Date.now() >= deadline) throw new WaitTimeoutError(id, shown, timeoutMs);
    }
  }

  /** Cancel an unfinished task (409 `conflict` when it has finished). */
  async cancel(id, { withChildren = false } = {}) {
    return this.#call("POST", `/tasks/${taskId(id)}/cancel${withChildren ? "?with_children=true" : ""}`);
  }

  /** Run a finished task again, now: `{id, attempt}`. */
  async retry(id) {
    return this.#call("POST", `/tasks/${taskId(id)}/retry`);
  }

  /**
   * Send the signal `name` to an unfinished task with `data` (JSON; undefined sends `{}`): kept
   * until a run of it awaits it; a task awaiting it is due at once. `{id, woke}` (`id` the
   * signal's own). 409 `conflict` when the task has finished.
   */
  async signal(id, name, data = {}) {
    if (typeof name !== "string" || name === "") throw new TypeError(`signal: the name is text, not ${String(name)}`);
    // fetch drops a path's dot segments, escaped or not: such a name would reach another route.
    if (name === "." || name === "..") throw new TypeError(`signal: a signal named ${name} cannot be sent in a URL's path`);
    return this.#call("POST", `/tasks/${taskId(id)}/signals/${encodeURIComponent(name)}`, data);
  }

  /**
   * Task events as they happen (`GET /api/v1/events`, Server-Sent Events), open once this
   * resolves (a task queued after it is told): an `EventStream`, async iterable of `[kind,
   * data]`, kind "task" (data: `{id, queue, handler, state, attempt, failures, progress?,
   * finished_on?}`) or "lagged" (events were lost: read again what you show). `queue`,
   * `handler`: a name or names; `tasks`: ids, whose states as they are come first;
   * `lastEventId`: go on from a stream's `lastEventId` (what it missed is told first);
   * `reconnectMs`: how long a broken stream tries to reconnect (0: it throws, and ends when the
   * server ends it). `signal`: an `AbortSignal` that closes the stream.
   */
  async events({ queue, handler, tasks, lastEventId = null, reconnectMs = 60_000, signal } = {}) {
    signal?.throwIfAborted();
    const params = new URLSearchParams();
    for (const [arg, name, value] of [["queue", "queue", queue], ["handler", "handler", handler], ["tasks", "task", tasks]]) {
      if (value == null) continue;
      const values = [value].flat();
      // An empty list would be no filter at all, the server's every task.
      if (!values.length) throw new TypeError(`events({${arg}: []}): an empty list follows nothing; leave it out for all`);
      params.set(name, values.map((v) => (name === "task" ? taskId(v) : v)).join(","));
    }
    const query = params.toString() ? `?${params}` : "";
    return EventStream.connect(this.baseUrl, `${this.baseUrl}/api/v1/events${query}`, this.token, lastEventId, reconnectMs, signal);
  }

  async #call(method, path, body, timeoutMs = this.timeoutMs, signal = undefined) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    // Before anything is sent, and not as `unreachable`: a value JSON cannot hold (a BigInt, a
    // cycle) is the caller's TypeError, as Python's client raises it.
    const sent = body === undefined ? undefined : JSON.stringify(body);
    const [limit, release] = within(timeoutMs, signal);
    let answer, text;
    try {
      for (let tries = 2; ; ) {
        try {
          answer = await fetch(`${this.baseUrl}/api/v1${path}`, {
            method,
            headers,
            body: sent,
            signal: limit,
          });
          break;
        } catch (e) {
          // A kept connection the server closed as it was reused, before any answer (`serve` lets
          // an idle one go only before a request's head has come: it took none): sent once more,
          // on another connection, as Python's client does. undici itself does not.
          if (--tries > 0 && e?.cause?.code === "UND_ERR_SOCKET" && !limit.aborted) continue;
          throw e;
        }
      }
      text = await answer.text();
    } catch (e) {
      // The caller's abort is theirs, not an unreachable server.
      signal?.throwIfAborted();
      throw unreachable(this.baseUrl, e, answer !== undefined);
    } finally {
      release();
    }
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      throw new TaskhostError(answer.status, "http", text.slice(0, 200));
    }
    if (!answer.ok) {
      throw new TaskhostError(answer.status, String(json?.error?.code ?? "http"), String(json?.error?.message ?? text));
    }
    return json;
  }
}

/**
 * A signal that aborts after `ms`, or when `signal` (the caller's, if any) does; and what lets go
 * of the caller's signal once the request is over (a long-lived one gathers no listeners).
 */
function within(ms, signal) {
  const timeout = AbortSignal.timeout(ms);
  if (!signal) return [timeout, () => {}];
  if (AbortSignal.any) return [AbortSignal.any([timeout, signal]), () => {}];
  // Node.js before 20.3.
  const both = new AbortController();
  const onAbort = () => both.abort(signal.reason);
  const onTimeout = () => both.abort(timeout.reason);
  if (signal.aborted) onAbort();
  signal.addEventListener("abort", onAbort, { once: true });
  timeout.addEventListener("abort", onTimeout, { once: true });
  return [both.signal, () => signal.removeEventListener("abort", onAbort)];
}

function task(t) {
  const unknown = Object.keys(t).filter((k) => !TASK_FIELDS.includes(k));
  if (unknown.length) throw new TypeError(`not a field of a task: ${unknown.join(", ")} (fields: ${TASK_FIELDS.join(", ")})`);
  return Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined && v !== null));
}

/** A task's id as given: a number, a bigint or its digits as a string; anything else (a
 * fraction, a boolean, null) is refused rather than read as another task's id. */
function taskId(id) {
  const n = typeof id === "number" || typeof id === "bigint" || (typeof id === "string" && /^[0-9]+$/.test(id)) ? Number(id) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new TypeError(`not a task id: ${typeof id === "string" ? JSON.stringify(id) : String(id)}`);
  return n;
}
