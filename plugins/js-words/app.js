// A task handler in JavaScript: the most frequent words of {"text": "...", "top": N}.
//
// Built with componentize-js against wit/task-handler.wit (see plugins/build.sh). Reports progress
// every tenth of the lines, partial results half way, logs a summary, and throws a non-retryable
// `invalid-input` error on bad data (a thrown {code, message, retryable} is the WIT error).
// {"crash": "why"} throws an Error, as a handler with a bug would: `handle` turns any other thrown
// value into an `uncaught-exception` with its message and stack (componentize-js would otherwise
// fail to read it as the WIT error, and the run would trap without saying why).
import { setProgress, setResults, log } from "taskhost:plugin/host@0.2.0";

function invalid(message) {
  return { code: "invalid-input", message, retryable: false };
}

export function handle(task) {
  try {
    return words(task);
  } catch (e) {
    if (e && typeof e.code === "string") throw e;
    throw { code: "uncaught-exception", message: e && e.stack ? `${e}\n${e.stack}` : String(e), retryable: true };
  }
}

function words(task) {
  let data;
  try {
    data = JSON.parse(task.data);
  } catch (e) {
    throw invalid(`data is not JSON: ${e}`);
  }
  if (data !== null && typeof data === "object" && "crash" in data) {
    console.log("about to crash");
    throw new Error(`crash requested: ${data.crash}`);
  }
  if (data === null || typeof data.text !== "string") {
    throw invalid('expected {"text": "...", "top": N}');
  }
  const top = Number.isInteger(data.top) && data.top > 0 ? data.top : 3;
  const lines = data.text.split("\n");
  const counts = new Map();
  const step = Math.max(1, Math.floor(lines.length / 10));
  lines.forEach((line, i) => {
    for (const word of line.toLowerCase().match(/[a-z0-9']+/g) || []) {
      counts.set(word, (counts.get(word) || 0) + 1);
    }
    if ((i + 1) % step === 0) {
      setProgress(Math.min(99, Math.floor(((i + 1) * 100) / lines.length)));
    }
    if (i + 1 === Math.floor(lines.length / 2)) {
      setResults(JSON.stringify({ distinct_so_far: counts.size }));
    }
  });
  const ranked = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, top)
    .map(([word, count]) => ({ word, count }));
  log("info", `task ${task.taskId} attempt ${task.attempt}: ${counts.size} distinct words`);
  setProgress(100);
  if (data.extras) return JSON.stringify({ distinct: counts.size, top: ranked, extras: extras(data.text, counts) });
  return JSON.stringify({ distinct: counts.size, top: ranked });
}

// What the runtime has besides the language itself (docs/handlers.md, "What the JavaScript runtime has"),
// used once each so a test proves it: TextEncoder, Object.groupBy, toSorted, structuredClone,
// URLSearchParams, btoa/atob, BigInt, crypto.randomUUID, Date and localeCompare.
function extras(text, counts) {
  const byLength = Object.groupBy([...counts.keys()], (w) => String(w.length));
  const copy = structuredClone({ words: [...counts.keys()].toSorted((a, b) => a.localeCompare(b)) });
  const query = new URLSearchParams({ q: text.split("\n")[0] }).toString();
  return {
    utf8_bytes: new TextEncoder().encode(text).length,
    by_length: byLength,
    sorted: copy.words,
    query,
    base64: btoa(text.slice(0, 5)),
    round_trip: atob(btoa(text.slice(0, 5))) === text.slice(0, 5),
    big: (2n ** 70n).toString(),
    uuid_length: crypto.randomUUID().length,
    year_ok: new Date().getUTCFullYear() >= 2024,
  };
}
