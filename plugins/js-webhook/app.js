// Calls a webhook with taskhost's JavaScript SDK: POSTs the task's `payload` as JSON to its `url` (a GET
// when it has none) and returns the status and the answer. A 429 or 503 answer snoozes the task until its
// Retry-After, another 5xx is retried, a 4xx is not.
// The URL must be granted to this handler in the operator's configuration ([handlers.js-webhook.grants.http]).
import { handler, request, progress, log } from "./sdk/taskhost.js";

export const handle = handler(async (task) => {
  const { url, payload, timeout = 30 } = task.data;
  log.info(`calling ${url}`);
  const response = await request(url, { json: payload, timeout });
  response.snoozeIfBusy().raiseForStatus(); // 429, 503: snoozed after Retry-After; other 5xx: retried; 4xx: failed
  progress(100);
  if (response.headers.get("content-type") === "application/json") {
    return { status: response.status, json: response.json() };
  }
  return { status: response.status, response: response.text.slice(0, 1000) };
});
