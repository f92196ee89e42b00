// Does nothing, with taskhost's JavaScript SDK: what a run of a JavaScript handler costs the worker
// before the handler's own work (`taskhost bench --handler js-noop`).
import { handler } from "./sdk/taskhost.js";

export const handle = handler(async () => null);
