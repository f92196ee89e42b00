"""Fans out with taskhost's Python SDK: queues one task of `handler` (default `echo`) for each item of
the task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
are written with this run's end, only if it ends well. With `"join": true`, one more task of this handler
after all of them (`run_anyway` even if some die), which collects their results: a fan-out and join.
With `"approval": NAME`, it first waits for that signal (`approval_timeout` seconds, default a day), then
fans out and returns the signal's data as `approval`; no signal in time, it fails `not-approved`.
`{"median_of": [numbers]}` returns their median (from a module imported inside the function);
`{"exit": CODE}` calls `sys.exit(CODE)`."""
import taskhost


def handle(task):
    if "median_of" in task.data:
        import statistics  # named only here: the SDK imported it when the component was made

        return {"median": statistics.median(task.data["median_of"])}
    if "exit" in task.data:
        import sys

        sys.exit(task.data["exit"])
    if task.data.get("collect"):
        found = taskhost.dependencies()
        succeeded = sum(1 for d in found if d.succeeded)
        return {"tasks": len(found), "succeeded": succeeded, "results": [d.results for d in found]}
    items = task.data.get("items")
    if not isinstance(items, list):
        raise taskhost.Fail("invalid-input", 'data has no "items" list')
    approval = None
    if task.data.get("approval"):
        approval = taskhost.await_signal(task.data["approval"], task.data.get("approval_timeout", 86400))
        if approval is None:
            raise taskhost.Fail("not-approved", f"no {task.data['approval']!r} signal in time")
    parts = [
        taskhost.enqueue(task.data.get("handler", "echo"), {"item": item}, delay=task.data.get("delay"))
        for item in items
    ]
    if task.data.get("join"):
        anyway = bool(task.data.get("run_anyway"))
        taskhost.enqueue(task.handler, {"collect": True}, after=parts, run_anyway=anyway)
    if approval is not None:
        return {"queued": len(items), "approval": approval}
    return {"queued": len(items)}
