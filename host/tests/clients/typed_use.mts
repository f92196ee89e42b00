// An application's use of the Node client, for `tsc --strict` (tests/it/clients.rs): each answer
// read through its type, so a type that no longer fits fails the check, as does index.d.ts itself.
import { Client, TaskhostError, WaitTimeoutError } from "taskhost-client";
import type { Cancelled, Queued, Retried, RunStatus, TaskBrief, TaskDetail, TaskEvent, TaskInput, TaskState } from "taskhost-client";

export async function use(client: Client): Promise<string[]> {
  const said: string[] = [];
  const id: number = await client.enqueue("mail", { to: "a@example.com" }, { queue: "mail", priority: 2 });
  const queued: Queued = await client.enqueueUnique("digest", null, "digest-1", { unique_states: "any" });
  if (!queued.created) said.push(`held by ${queued.id}`);
  const batch: TaskInput[] = [{ handler: "echo", data: { n: 1 } }, { handler: "echo", queue: "q", after: [id] }];
  const ids: number[] = await client.enqueueMany(batch);
  const told: Queued[] = await client.enqueueManyUnique(batch);
  said.push(...told.map((q) => String(q.created)));
  try {
    const done: TaskDetail = await client.wait(ids[0], { timeoutMs: null, signal: AbortSignal.timeout(120_000) });
    const state: TaskState = done.task.state;
    const status: RunStatus = done.runs[done.runs.length - 1].status;
    said.push(state, status, String(done.runs[0].error_code ?? ""));
  } catch (e) {
    if (e instanceof WaitTimeoutError) said.push(e.task.task.state);
    else if (e instanceof TaskhostError) said.push(`${e.status} ${e.code} ${e.detail}`);
  }
  const cancelled: Cancelled = await client.cancel(id, { withChildren: true });
  const retried: Retried = await client.retry(id);
  said.push(`${cancelled.cancelled} ${cancelled.children_cancelled ?? 0} ${retried.attempt}`);
  const stream = await client.events({ queue: "mail" });
  for await (const event of stream) {
    const [kind, data]: TaskEvent = event;
    if (kind === "task") {
      const brief: TaskBrief = data;
      said.push(brief.state, String(brief.progress ?? 0));
    } else {
      said.push(data.reason);
    }
    break;
  }
  stream.close();
  return said;
}
