// Types for taskhost-client (index.mjs): the API's JSON as TypeScript sees it. The server's own
// description is `GET /api/openapi.json`.

export type TaskState = "waiting" | "scheduled" | "running" | "awaiting-retry" | "succeeded" | "dead" | "cancelled";
/** A run's status (and a task's `last_status`: its latest run's). */
export type RunStatus = "scheduled" | "running" | "success" | "error" | "timeout" | "cancelled" | "snoozed" | "waiting";
export declare const FINAL_STATES: readonly ["succeeded", "dead", "cancelled"];
export declare const TASK_FIELDS: readonly string[];

/** A task to queue: the API's `TaskInput`. */
export interface TaskInput {
  handler: string;
  data?: unknown;
  queue?: string;
  priority?: number;
  max_attempts?: number;
  key?: string;
  unique_key?: string;
  unique_for?: string;
  unique_states?: "unfinished" | "succeeded" | "any";
  queued_by?: string;
  /** An RFC 3339 time with its zone, e.g. "2026-12-01T09:00:00Z". */
  at?: string;
  /** e.g. "90s". */
  run_timeout?: string;
  after?: number[];
  run_anyway?: boolean;
  version?: string;
}

/** What `enqueueUnique` (or `enqueueManyUnique`, for each task) did: the task's id, and whether this call queued it (false: a task held the key). */
export interface Queued {
  id: number;
  created: boolean;
}

/** What `cancel` answers: `children_cancelled` (how many) with `withChildren`. */
export interface Cancelled {
  id: number;
  cancelled: boolean;
  children_cancelled?: number | null;
}

/** What `retry` answers: the attempt its next run will be. */
export interface Retried {
  id: number;
  attempt: number;
}

/** What `signal` answers: the signal's own id (not the task's), and whether its task awaited it and is now due. */
export interface SignalSent {
  id: number;
  woke: boolean;
}

export interface Task {
  id: number;
  state: TaskState;
  handler: string;
  queue: string;
  data: unknown;
  last_status: RunStatus;
  queued_by?: string | null;
  [field: string]: unknown;
}

export interface Run {
  id: number;
  attempt: number;
  status: RunStatus;
  results?: unknown;
  error_code?: string | null;
  /** Who produced its error: the host or the handler (the guest). */
  error_source?: "host" | "guest" | null;
  error_message?: string | null;
  started_on?: string | null;
  finished_on?: string | null;
  [field: string]: unknown;
}

export interface TaskDetail {
  task: Task;
  runs: Run[];
  [field: string]: unknown;
}

/** A task as the event stream tells it. */
export interface TaskBrief {
  id: number;
  queue: string;
  handler: string;
  state: TaskState;
  attempt: number;
  failures: number;
  /** While it runs. */
  progress?: number;
  /** Once final. */
  finished_on?: string;
}

export type TaskEvent = ["task", TaskBrief] | ["lagged", { reason: "behind" | "burst" | "unavailable" | "resume"; looks?: number }];

/**
 * An open event stream: reconnects by itself when it breaks or the server ends it, sending
 * `lastEventId` (what it missed is told first, or `lagged` with reason "resume"), for
 * `reconnectMs`; then throws `TaskhostError` "unreachable".
 */
export declare class EventStream implements AsyncIterable<TaskEvent> {
  /** The id of the last look it was told; null before the first. */
  readonly lastEventId: string | null;
  [Symbol.asyncIterator](): AsyncIterator<TaskEvent>;
  close(): void;
}

export declare class TaskhostError extends Error {
  readonly status: number;
  /** Stable: "invalid", "unknown-handler", "not-found", "conflict", "deleted" (410: it succeeded, and its queue deleted it), "unauthorized", "busy", "unreachable", ... */
  readonly code: string;
  readonly detail: string;
}

export declare class WaitTimeoutError extends Error {
  /** The task as it was when the wait ran out. */
  readonly task: TaskDetail;
}

export declare class Client {
  constructor(baseUrl?: string, options?: { token?: string; timeoutMs?: number });
  enqueue(handler: string, data?: unknown, fields?: Omit<TaskInput, "handler" | "data">): Promise<number>;
  /** Queue one task unless a task holds `uniqueKey`: its id, and whether this call queued it. */
  enqueueUnique(
    handler: string,
    data: unknown,
    uniqueKey: string,
    fields?: Omit<TaskInput, "handler" | "data" | "unique_key">,
  ): Promise<Queued>;
  enqueueMany(tasks: TaskInput[]): Promise<number[]>;
  /** As `enqueueMany`, telling for each task whether this call queued it. */
  enqueueManyUnique(tasks: TaskInput[]): Promise<Queued[]>;
  get(id: number): Promise<TaskDetail>;
  /** `signal` ends the wait, rejecting with its reason. */
  wait(id: number, options?: { timeoutMs?: number | null; signal?: AbortSignal }): Promise<TaskDetail>;
  cancel(id: number, options?: { withChildren?: boolean }): Promise<Cancelled>;
  retry(id: number): Promise<Retried>;
  /** `data` is JSON (`{}` when left out); kept until a run of the task awaits it. */
  signal(id: number, name: string, data?: unknown): Promise<SignalSent>;
  events(options?: {
    queue?: string | string[];
    handler?: string | string[];
    tasks?: number[];
    /** Go on from a stream's `lastEventId`. */
    lastEventId?: string | null;
    /** How long a broken stream tries to reconnect; 0: it throws (default 60,000). */
    reconnectMs?: number;
    /** Closes the stream when it aborts. */
    signal?: AbortSignal;
  }): Promise<EventStream>;
}
