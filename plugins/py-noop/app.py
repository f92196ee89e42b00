"""Does nothing, with taskhost's Python SDK: what a run of a Python handler costs the worker before
the handler's own work (`taskhost bench --handler py-noop`)."""
import taskhost  # noqa: F401 (the SDK is the component's entry; this names it for the build)


def handle(task):
    return None
