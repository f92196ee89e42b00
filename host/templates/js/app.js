// {{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm.
import { setProgress, log } from "taskhost:plugin/host@0.1.0";

function invalid(message) {
  return { code: "invalid-input", message, retryable: false };
}

export function handle(task) {
  try {
    return work(task);
  } catch (e) {
    // Only a thrown {code, message, retryable} is a handler error: anything else (an Error)
    // would trap without its message, so it is reported as the host reports any language's
    // uncaught exception (retried; the host applies its rule to this code).
    if (e && typeof e.code === "string") throw e;
    throw { code: "uncaught-exception", message: e && e.stack ? `${e}\n${e.stack}` : String(e), retryable: true };
  }
}

function work(task) {
  let data;
  try {
    data = JSON.parse(task.data);
  } catch (e) {
    throw invalid(String(e));
  }
  if (!data || !data.name) throw invalid('no "name" in the data');
  setProgress(50);
  log("info", `attempt ${task.attempt} of task ${task.taskId}`);
  console.log("printed lines land in the run's logs too");
  return JSON.stringify({ hello: data.name });
}
