// Fans out with taskhost's JavaScript SDK: queues one task of `handler` (default `echo`) for each item of
// the task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
// are written with this run's end, only if it ends well. With `"join": true`, one more task of this handler
// after all of them (`run_anyway` even if some die), which collects their results: a fan-out and join.
// With `"approval": NAME`, it first waits for that signal (`approval_timeout` seconds, default a day), then
// fans out and returns the signal's data as `approval`; no signal in time, it fails `not-approved`.
import { handler, enqueue, dependencies, awaitSignal, Fail } from "./sdk/taskhost.js";

export const handle = handler(async (task) => {
  if (task.data.collect) {
    const found = dependencies();
    const succeeded = found.filter((d) => d.succeeded).length;
    return { tasks: found.length, succeeded, results: found.map((d) => d.results) };
  }
  const { items, delay } = task.data;
  if (!Array.isArray(items)) throw new Fail("invalid-input", 'data has no "items" list');
  let approval = null;
  if (task.data.approval) {
    approval = awaitSignal(task.data.approval, task.data.approval_timeout ?? 86400);
    if (approval === null) throw new Fail("not-approved", `no ${JSON.stringify(task.data.approval)} signal in time`);
  }
  const parts = items.map((item) => enqueue(task.data.handler || "echo", { item }, { delay }));
  if (task.data.join) enqueue(task.handler, { collect: true }, { after: parts, runAnyway: Boolean(task.data.run_anyway) });
  return approval === null ? { queued: items.length } : { queued: items.length, approval };
});
