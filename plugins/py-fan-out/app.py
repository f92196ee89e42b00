"""Fans out with taskhost's Python SDK: queues one task of `handler` (default `echo`) for each item of
the task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
are written with this run's end, only if it ends well."""
import taskhost


def handle(task):
    items = task.data.get("items")
    if not isinstance(items, list):
        raise taskhost.Fail("invalid-input", 'data has no "items" list')
    for item in items:
        taskhost.enqueue(task.data.get("handler", "echo"), {"item": item}, delay=task.data.get("delay"))
    return {"queued": len(items)}
