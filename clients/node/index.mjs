// A client for taskhost's HTTP API (`taskhost serve`) over the platform's `fetch` (Node.js 18+,
// Deno, Bun, browsers); no dependencies. Types: index.d.ts.

/** States a task does not leave unless someone replays it. */
export const FINAL_STATES = Object.freeze(["succeeded", "dead", "cancelled"]);

/** The fields of a task to queue, as the API's `TaskInput` names them. */
export const TASK_FIELDS = Object.freeze([
  "handler", "data", "queue", "priority", "max_attempts", "key", "unique_key", "unique_for",
  "unique_states", "queued_by", "at", "run_timeout", "after", "run_anyway", "version",
]);

/** The longest one `?wait=` the server takes, in milliseconds. */
const MAX_WAIT_MS = 60_000;

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
   * the time lasts (the task read meanwhile without `?wait=`). `signal`: an `AbortSignal` that
   * ends the wait (an HTTP request whose client went away), rejecting with its reason.
   */
  async wait(id, { timeoutMs = 60_000, signal } = {}) {
    signal?.throwIfAborted();
    if (timeoutMs != null && !(timeoutMs >= 0)) throw new RangeError(`wait(timeoutMs: ${timeoutMs}): milliseconds, at least 0 (null: no end)`);
    taskId(id);
    const deadline = timeoutMs == null ? null : Date.now() + timeoutMs;
    let pause = 100;
    for (;;) {
      const left = deadline == null ? MAX_WAIT_MS : deadline - Date.now();
      const waitMs = Math.max(0, Math.min(Math.floor(left), MAX_WAIT_MS));
      let shown;
      try {
        shown = await this.#call("GET", `/tasks/${taskId(id)}?wait=${waitMs}ms`, undefined, waitMs + this.timeoutMs, signal);
      } catch (e) {
        // A busy server still answers a plain read: the task is read so meanwhile.
        if (!(e instanceof TaskhostError) || e.code !== "busy") throw e;
        shown = await this.#call("GET", `/tasks/${taskId(id)}`, undefined, this.timeoutMs, signal);
        if (!FINAL_STATES.includes(shown.task.state)) {
          const sleep = deadline == null ? pause : Math.max(0, Math.min(pause, deadline - Date.now()));
          await pauseFor(sleep, signal);
          pause = Math.min(pause * 2, 2_000);
          if (deadline == null || Date.now() < deadline) continue;
        }
      }
      if (FINAL_STATES.includes(shown.task.state)) return shown;
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
    const [limit, release] = within(timeoutMs, signal);
    let answer, text;
    try {
      for (let tries = 2; ; ) {
        try {
          answer = await fetch(`${this.baseUrl}/api/v1${path}`, {
            method,
            headers,
            body: body === undefined ? undefined : JSON.stringify(body),
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
      throw new TaskhostError(0, "unreachable", `${this.baseUrl}: ${e.cause?.message ?? e.message}`);
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

/** `ms` passing, or `signal` aborting first (rejecting with its reason). */
function pauseFor(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const aborted = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }, ms);
    signal?.addEventListener("abort", aborted, { once: true });
  });
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

/** A minute without a byte from the event stream ends it. */
const STREAM_IDLE_MS = 60_000;

/** Aborts `closer` once `ms` pass without a `touch()`; `expired` says it did. */
class Idle {
  constructor(closer, ms) {
    this.closer = closer;
    this.ms = ms;
    this.expired = false;
    this.touch();
  }
  touch() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.expired = true;
      this.closer.abort();
    }, this.ms);
    // A stream left open does not hold a Node.js process that is otherwise done.
    this.timer.unref?.();
  }
  stop() {
    clearTimeout(this.timer);
  }
}

/**
 * An open event stream (`Client.events`): async iterable of `[kind, data]`; `close()` leaves.
 * `lastEventId`: the id of the last look it was told (null before the first), which
 * `events({lastEventId})` goes on from, here or in another process. When the stream breaks or
 * the server ends it, it reconnects by itself with that id (`Last-Event-ID`): the server first
 * tells what it missed, or `["lagged", {reason: "resume"}]` when it cannot (a server restarted,
 * or away longer than it keeps), as the stream itself does when it broke before it had an id.
 * It tries for `reconnectMs`, then throws `TaskhostError` `unreachable`.
 */
export class EventStream {
  #baseUrl;
  #url;
  #token;
  #reconnectMs;
  #closed = false;
  #heard = false;
  #closer = null;
  #idle = null;
  #answer = null;
  #events;
  #release = () => {};

  constructor(baseUrl, url, token, lastEventId, reconnectMs) {
    this.#baseUrl = baseUrl;
    this.#url = url;
    this.#token = token;
    this.lastEventId = lastEventId;
    this.#reconnectMs = reconnectMs;
    // One reading: iterated once (again, it is over).
    this.#events = this.#run();
  }

  [Symbol.asyncIterator]() {
    return this.#events;
  }

  close() {
    this.#closed = true;
    this.#idle?.stop();
    this.#closer?.abort();
    this.#release();
  }

  /**
   * A stream connected (what `Client.events` returns); `signal` closes it, while it connects too,
   * and is let go of when the stream ends.
   */
  static async connect(baseUrl, url, token, lastEventId, reconnectMs, signal) {
    const stream = new EventStream(baseUrl, url, token, lastEventId, reconnectMs);
    if (signal) {
      const onAbort = () => stream.close();
      signal.addEventListener("abort", onAbort, { once: true });
      stream.#release = () => signal.removeEventListener("abort", onAbort);
    }
    try {
      await stream.#opening(signal);
    } catch (e) {
      stream.close();
      signal?.throwIfAborted();
      throw e;
    }
    return stream;
  }

  /**
   * The first connection. A server holding as many waits and streams as it may (503 `busy`) is
   * asked again while `reconnectMs` lasts (a quarter second, then each second), and its last
   * answer thrown when that ends; any other failure throws at once.
   */
  async #opening(signal) {
    const deadline = Date.now() + this.#reconnectMs;
    for (let pause = 250; ; pause = 1000) {
      try {
        return await this.#open();
      } catch (e) {
        const left = deadline - Date.now();
        if (e?.code !== "busy" || this.#closed || !(left > 0)) throw e;
        // (The last try at the deadline itself.)
        await pauseFor(Math.min(pause, left), signal);
      }
    }
  }

  /**
   * Connect, with the last id if there is one; an error answer or no server throws. The answer
   * is waited for at most `withinMs` (at least 5 s), so a reconnect gives up at its deadline even
   * when a server takes connections and does not answer; then a minute of silence breaks it.
   */
  async #open(withinMs = STREAM_IDLE_MS) {
    const closer = new AbortController();
    // Kept at once: a close() while this connects aborts it.
    this.#closer = closer;
    const headers = { accept: "text/event-stream" };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (this.lastEventId != null) headers["last-event-id"] = this.lastEventId;
    // A comment comes every 15 s: a minute without a byte means the server is gone.
    const idle = new Idle(closer, Math.min(STREAM_IDLE_MS, Math.max(withinMs, 5_000)));
    let answer;
    try {
      answer = await fetch(this.#url, { headers, signal: closer.signal });
    } catch (e) {
      idle.stop();
      throw new TaskhostError(0, "unreachable", `${this.#baseUrl}: ${e.cause?.message ?? e.message}`);
    }
    if (!answer.ok) {
      idle.stop();
      const text = await answer.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {}
      throw new TaskhostError(answer.status, String(json?.error?.code ?? "http"), String(json?.error?.message ?? text));
    }
    idle.ms = STREAM_IDLE_MS;
    idle.touch();
    [this.#idle, this.#answer] = [idle, answer];
  }

  async *#run() {
    let deadline = null;
    try {
      for (;;) {
        this.#heard = false;
        let broke = null;
        try {
          yield* this.#read(this.#answer.body, this.#closer, this.#idle);
        } catch (e) {
          // A break is reconnected; anything else (an event not JSON) is the caller's.
          if (!(e instanceof TaskhostError)) throw e;
          broke = e;
        }
        if (this.#closed) return;
        if (!(this.#reconnectMs > 0)) {
          if (broke) throw broke;
          return;
        }
        const placed = this.lastEventId != null;
        // The time to reconnect runs from the last connection that told anything: one answering
        // and ending at once, again and again, is not reconnected forever.
        if (deadline == null || this.#heard) deadline = Date.now() + this.#reconnectMs;
        for (let pause = this.#heard ? 250 : 1000; ; pause = 1000) {
          await new Promise((resolve) => setTimeout(resolve, pause));
          if (this.#closed) return;
          try {
            await this.#open(deadline - Date.now());
            break;
          } catch (e) {
            if (this.#closed) return;
            // Only a server away, busy or behind a proxy restarting is waited for; given up on, it
            // is unreachable, whatever its last answer was.
            if (![0, 502, 503, 504].includes(e.status)) throw e;
            if (Date.now() >= deadline) {
              if (e.status === 0) throw e;
              const gaveUp = `gave up reconnecting after ${this.#reconnectMs} ms: ${e.status} ${e.code}: ${e.detail}`;
              throw new TaskhostError(0, "unreachable", `${this.#baseUrl}: ${gaveUp}`);
            }
          }
        }
        if (this.#closed) return;
        if (!placed) yield ["lagged", { reason: "resume" }];
      }
    } finally {
      this.#idle?.stop();
      this.#closer?.abort();
      this.#release();
    }
  }

  /** The events of one connection; ends when it closes, throws when it breaks. */
  async *#read(body, closer, idle) {
    // A reader, not `for await`: browsers before 2024 cannot iterate a stream.
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        idle.touch();
        this.#heard = true;
        // Lines may end in CRLF, LF or CR; a CR last may be half of a CRLF.
        text = (text + decoder.decode(value, { stream: true })).replace(/\r\n|\r(?!$)/g, "\n");
        const blocks = text.split("\n\n");
        text = blocks.pop();
        for (const block of blocks) {
          let kind = "message";
          let id = null;
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) kind = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            // (SSE: one space after the colon is not the value's; an id holding NUL is ignored.)
            else if (line.startsWith("id:") && !line.includes("\0")) id = line.slice(3).replace(/^ /, "");
          }
          // An id is taken with its event, and alone too (a place sent to a quiet stream); an
          // empty one leaves no place.
          if (id != null) this.lastEventId = id || null;
          if (data.length) yield [kind, JSON.parse(data.join("\n"))];
        }
      }
    } catch (e) {
      if (e instanceof SyntaxError) throw e;
      if (idle.expired) throw new TaskhostError(0, "unreachable", `${this.#baseUrl}: the event stream was silent for a minute`);
      if (!closer.signal.aborted) throw new TaskhostError(0, "unreachable", `${this.#baseUrl}: the event stream broke: ${e.message}`);
    } finally {
      idle.stop();
      closer.abort();
    }
  }
}
