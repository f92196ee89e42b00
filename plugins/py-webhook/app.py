"""Calls a webhook with taskhost's Python SDK: POSTs the task's `payload` as JSON to its `url` (a GET
when it has none) and returns the status and the answer. A 429 or 503 answer snoozes the task until
its Retry-After, another 5xx is retried, a 4xx is not. The URL must be granted to this handler in the operator's configuration
([handlers.py-webhook.grants.http]).
"""
import taskhost


def handle(task):
    url, payload = task.data["url"], task.data.get("payload")
    timeout = task.data.get("timeout", 30)
    taskhost.log.info(f"calling {url}")
    if payload is None:
        response = taskhost.http.get(url, timeout=timeout)
    else:
        response = taskhost.http.post(url, json=payload, timeout=timeout)
    response.snooze_if_busy().raise_for_status()  # 429, 503: snoozed; other 5xx: retried; 4xx: failed
    taskhost.progress(100)
    if response.headers.get("content-type") == "application/json":
        return {"status": response.status, "json": response.json()}
    return {"status": response.status, "response": response.text[:1000]}
