// Fans out with taskhost's JavaScript SDK: queues one task of `handler` (default `echo`) for each item of
// the task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
// are written with this run's end, only if it ends well. With `"join": true`, one more task of this handler
// after all of them (`run_anyway` even if some die), which collects their results: a fan-out and join.
import { handler, enqueue, dependencies, Fail } from "./sdk/taskhost.js";

export const handle = handler(async (task) => {
  if (task.data.collect) {
    const found = dependencies();
    const succeeded = found.filter((d) => d.succeeded).length;
    return { tasks: found.length, succeeded, results: found.map((d) => d.results) };
  }
  const { items, delay } = task.data;
  if (!Array.isArray(items)) throw new Fail("invalid-input", 'data has no "items" list');
  const parts = items.map((item) => enqueue(task.data.handler || "echo", { item }, { delay }));
  if (task.data.join) enqueue(task.handler, { collect: true }, { after: parts, runAnyway: Boolean(task.data.run_anyway) });
  return { queued: items.length };
});
