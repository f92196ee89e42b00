// taskhost's Node.js client (clients/node, installed by path) against a live server with a
// worker: its routes and fields checked against the server's OpenAPI document, then each call.
// Prints one JSON line of what it saw.
//
//     node client_node.mjs BASE_URL   (run where `npm install ./clients/node` put node_modules)
import { Client, FINAL_STATES, TASK_FIELDS, TaskhostError, WaitTimeoutError } from "taskhost-client";

const base = process.argv[2];
const client = new Client(base);
const check = (ok, what) => { if (!ok) throw new Error(what); };
const doc = await (await fetch(`${base}/api/openapi.json`)).json();
const fields = Object.keys(doc.components.schemas.TaskInput.properties);
check(TASK_FIELDS.every((f) => fields.includes(f)), `fields: ${TASK_FIELDS.filter((f) => !fields.includes(f))}`);
for (const [path, method] of [["/api/v1/tasks", "post"], ["/api/v1/tasks/{id}", "get"],
  ["/api/v1/tasks/{id}/cancel", "post"], ["/api/v1/tasks/{id}/retry", "post"]]) {
  check(doc.paths[path]?.[method], `${method} ${path}`);
}
check(doc.paths["/api/v1/tasks/{id}"].get.parameters.some((p) => p.name === "wait" && p.in === "query"), "wait");
check(["queue", "handler", "task"].every((n) => doc.paths["/api/v1/events"].get.parameters.some((p) => p.name === n)), "events");
check(FINAL_STATES.every((s) => doc.components.schemas.TaskState.enum.includes(s)), "states");

const seen = {};
// The key is kept once it succeeded too: the worker may end the first before the second is sent.
const once = { unique_key: "node-once", unique_states: "succeeded" };
const one = await client.enqueue("echo", { n: 1 }, { queued_by: "node-client", ...once });
const again = await client.enqueue("echo", { n: 2 }, once);
const done = await client.wait(one, { timeoutMs: 60_000 });
seen.one = { same_id: one === again, state: done.task.state, results: done.runs.at(-1).results, queued_by: done.task.queued_by };
const ids = await client.enqueueMany([0, 1, 2].map((n) => ({ handler: "echo", data: { n }, priority: n })));
seen.many = [];
for (const id of ids) seen.many.push((await client.wait(id)).runs.at(-1).results);
const later = await client.enqueue("echo", { n: 9 }, { at: "2099-01-01T00:00:00Z" });
try {
  await client.wait(later, { timeoutMs: 300 });
  seen.timeout = "no error";
} catch (e) {
  seen.timeout = e instanceof WaitTimeoutError ? e.task.task.state : String(e);
}
seen.cancel = (await client.cancel(later)).cancelled;
try {
  await client.cancel(later);
} catch (e) {
  seen.cancel_again = [e.status, e.code];
}
seen.retry = (await client.retry(later)).attempt;
seen.after_retry = (await client.wait(later)).task.state;
const errors = {};
for (const [name, call] of [["unknown_handler", () => client.enqueue("missing")],
  ["bad_time", () => client.enqueue("echo", {}, { at: "tomorrow" })],
  ["not_found", () => client.get(999999)],
  ["unreachable", () => new Client("http://127.0.0.1:1").get(1)]]) {
  try {
    await call();
    errors[name] = "no error";
  } catch (e) {
    errors[name] = e instanceof TaskhostError ? [e.status, e.code, e.detail] : String(e);
  }
}
try {
  await client.enqueue("echo", {}, { colour: "red" });
} catch (e) {
  errors.unknown_field = e instanceof TypeError ? e.message : String(e);
}
seen.errors = errors;

// Events: a stream of one task is told its state at once; one of a queue, opened before a task
// is queued in it, is told that task until it ends.
// A lost end must fail the test, not hang it: the rest has a minute from here.
setTimeout(() => {
  console.error("the events were not told within a minute");
  process.exit(1);
}, 60_000).unref();
const asked = await client.events({ tasks: [one] });
for await (const [kind, data] of asked) {
  seen.events_asked = [kind, data.id === one, data.state];
  break;
}
asked.close();
const stream = await client.events({ queue: "node-events" });
const watched = await client.enqueue("echo", { n: 5 }, { queue: "node-events" });
const states = [];
for await (let [kind, data] of stream) {
  // Events were lost: read the task instead.
  if (kind === "lagged") [kind, data] = ["task", (await client.get(watched)).task];
  if (kind !== "task") continue;
  states.push(data.id === watched ? data.state : `another task: ${data.id}`);
  if (FINAL_STATES.includes(data.state)) break;
}
stream.close();
seen.events_queue = states;
console.log(JSON.stringify(seen));
