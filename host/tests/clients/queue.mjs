// A Node.js application using taskhost's HTTP API with fetch: it queues a task, polls it to its
// end and prints its results as one JSON line.
//
//     node queue.mjs BASE_URL [TOKEN]
const [base, token] = process.argv.slice(2);

async function call(method, path, body) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return [r.status, await r.json()];
}

const [status, added] = await call("POST", "/tasks", { handler: "word-count", data: { text: "x y x x" }, queued_by: "node" });
if (status !== 201) throw new Error(`queueing answered ${status}: ${JSON.stringify(added)}`);
const deadline = Date.now() + 60_000;
for (;;) {
  if (Date.now() > deadline) throw new Error("the task did not finish within 60 s");
  const [s, shown] = await call("GET", `/tasks/${added.id}`);
  if (s !== 200) throw new Error(`reading answered ${s}`);
  if (shown.task.last_status === "success") {
    console.log(JSON.stringify({ id: added.id, results: shown.runs.at(-1).results }));
    break;
  }
  await new Promise((done) => setTimeout(done, 50));
}
