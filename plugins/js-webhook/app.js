// Calls a webhook with fetch (componentize-js keeps wasi:http for a handler that calls fetch):
// POSTs the task's `payload` as JSON to its `url`, returns the status and the start of the
// response. A 5xx answer is a retryable failure, a 4xx one is not. The URL must be granted to
// this handler in the operator's configuration ([handlers.js-webhook.grants.http]).
export async function handle(task) {
    const data = JSON.parse(task.data);
    if (typeof data.url !== "string") {
        throw { code: "invalid-input", message: "data has no \"url\"", retryable: false };
    }
    let response;
    try {
        response = await fetch(data.url, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(data.payload ?? null),
        });
    } catch (e) {
        // A refused or failed request: the host's log says which, and why.
        throw { code: "request-failed", message: `POST ${data.url}: ${e}`, retryable: true };
    }
    const text = (await response.text()).slice(0, 1000);
    if (response.status >= 500) {
        throw { code: "http-5xx", message: `POST ${data.url} answered ${response.status}: ${text}`, retryable: true };
    }
    if (response.status >= 400) {
        throw { code: "http-4xx", message: `POST ${data.url} answered ${response.status}: ${text}`, retryable: false };
    }
    return JSON.stringify({ status: response.status, response: text });
}
