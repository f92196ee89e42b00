// Fans out with taskhost's JavaScript SDK: queues one task of `handler` (default `echo`) for each item of
// the task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
// are written with this run's end, only if it ends well.
import { handler, enqueue, Fail } from "./sdk/taskhost.js";

export const handle = handler(async (task) => {
  const { items, delay } = task.data;
  if (!Array.isArray(items)) throw new Fail("invalid-input", 'data has no "items" list');
  for (const item of items) enqueue(task.data.handler || "echo", { item }, { delay });
  return { queued: items.length };
});
