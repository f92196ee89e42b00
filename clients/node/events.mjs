// The event stream of taskhost's HTTP API (`GET /api/v1/events`, Server-Sent Events), which
// `Client.events` opens: its connection, reconnects with its place, and events.

import { TaskhostError } from "./index.mjs";

/**
 * `unreachable` for a request `e` ended, in words of this client's where undici's ("other side
 * closed") say less; `answered`: the answer's head had come.
 */
export function unreachable(baseUrl, e, answered) {
  const why =
    e?.cause?.code !== "UND_ERR_SOCKET"
      ? (e.cause?.message ?? e.message)
      : answered
        ? "the server closed the connection before the end of its answer"
        : "the server closed the connection without an answer";
  const error = new TaskhostError(0, "unreachable", `${baseUrl}: ${why}`);
  // Not enumerable: what a caller sees of the error is as before.
  if (lasting(e?.cause?.code)) Object.defineProperty(error, "lasting", { value: true });
  return error;
}

/**
 * Whether a connection failed for a reason that asking again does not mend (TLS's codes): the
 * server's certificate not trusted or not for its name, or TLS spoken to a server that does not
 * speak it. (A name the DNS does not know may be a restarting server's, as a headless
 * service's without a ready pod: it is asked again.)
 */
function lasting(code) {
  return typeof code === "string" && /CERT|SIGNATURE|HOSTNAME_MISMATCH|ERR_SSL_(WRONG_VERSION_NUMBER|RECORD_LAYER_FAILURE|PACKET_LENGTH_TOO_LONG)/.test(code);
}

/**
 * Whether `e` may pass if asked again: a server away (for no reason that lasts), or behind a
 * proxy answering 502, 503 or 504 (`serve` restarting).
 */
export function passing(e) {
  return [502, 503, 504].includes(e.status) || (e.status === 0 && !e.lasting);
}

/** `ms` passing, or `signal` aborting first (rejecting with its reason). */
export function pauseFor(ms, signal) {
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
      throw unreachable(this.#baseUrl, e, false);
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
            if (!passing(e)) throw e;
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
