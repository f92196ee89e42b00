"""taskhost's Python SDK: a task handler as a plain function.

    import taskhost

    def handle(task):
        response = taskhost.http.post(task.data["url"], json=task.data["payload"], timeout=10)
        response.raise_for_status()           # a 5xx answer is retried, a 4xx one is not
        taskhost.progress(100)
        return {"status": response.status}

`app.py` beside this file defines `handle(task)`. This module is the component's entry: the build
(`componentize-py -d wit -w task-handler-http componentize taskhost -p . -p sdk`) imports it, and it
imports `app`, once, when the component is made; each run then calls `app.handle`.

- `task`: `.id`, `.run_id`, `.attempt` (1 for the first run), `.handler`, `.queued_by`, `.data` (the
  task's JSON, parsed) and `.raw` (its text).
- Return a JSON-able value (the run's results) or None.
- `raise taskhost.Fail(code, message)`: the run fails and is not retried; `taskhost.Retry(code, message)`:
  it fails and is retried (up to the task's max_attempts). Any other exception ends the run as
  `uncaught-exception` (retried), its message the exception, then the traceback's frames in your files;
  `sys.exit()` ends it as `exit` (not retried), saying where.
- `raise taskhost.Snooze(seconds)`: not now; the task is due again after that long, this run is
  `snoozed` (not a failure, no attempt used). `response.snooze_if_busy()` does it for a 429 or 503
  answer, after its `Retry-After`.
- `taskhost.enqueue(handler, data, queue=, priority=, delay=, at=, unique_key=, max_attempts=)`: queue
  a task, this one's child, written only if this run ends well (returns or snoozes); `delay` in
  seconds, `at` seconds since 1970; `after=[numbers]` (and `run_anyway=True`) makes it wait for tasks this
  run queued before (a join). Refused, it raises `Fail("enqueue-refused", why)`.
- `taskhost.dependencies()`: in a join, the tasks it runs after with their results.
- `taskhost.await_signal(name, timeout)`: wait for a signal sent to the task (`taskhost signal ID NAME
  --data JSON`), `timeout` in seconds: its data once sent, None once the wait timed out; not sent yet, it
  ends the run waiting (by an exception `except Exception` does not catch), and the task runs again when
  the signal comes.
- `taskhost.progress(percent)`, `taskhost.partial(results)`, `taskhost.log.info(...)` (and `.debug`,
  `.warning`, `.error`); what `print` writes lands in the run's logs too.
- `taskhost.http.get/post/put/patch/delete/request(...)`: a subset of `requests` over wasi:http, sent
  where the operator's grant for this handler allows. A refused or failed request raises an
  `http.RequestError` that, uncaught, ends the run with its code (`request-denied`, `request-timeout`,
  `response-too-large`, `request-failed`); `raise_for_status()` raises `http.HTTPError` (`http-5xx`,
  retried; `http-4xx`, not, but for 408 and 429); `snooze_if_busy()` raises `Snooze` for a 429 or 503.

HTTP is in taskhost_http.py beside this file.
"""
import json as _json
import sys as _sys
import traceback as _traceback

import wit_world
from componentize_py_types import Err as _Err
from wit_world.imports import host as _host
from wit_world.imports import taskhost_plugin_types as _types
from wit_world.imports.taskhost_plugin_types import HandlerError as _HandlerError, LogLevel as _Level

__all__ = [
    "Task", "Error", "Fail", "Retry", "Snooze", "Waiting", "Dependency", "enqueue", "dependencies", "await_signal",
    "progress", "partial", "log", "http",
]


class Task:
    """The task a run is for."""

    __slots__ = ("id", "run_id", "attempt", "handler", "queued_by", "raw", "data")

    def __init__(self, task):
        self.id = task.task_id
        self.run_id = task.run_id
        self.attempt = task.attempt
        self.handler = task.handler
        self.queued_by = task.queued_by
        self.raw = task.data
        self.data = _json.loads(task.data)

    def __repr__(self):
        return f"Task(id={self.id}, attempt={self.attempt}, handler={self.handler!r}, data={self.raw[:200]!r})"


class Error(Exception):
    """A failure the handler knows about: `code` (short, machine-readable), `message`, and
    whether retrying can help."""

    def __init__(self, code, message="", retryable=False):
        super().__init__(f"{code}: {message}" if message else code)
        self.code, self.message, self.retryable = str(code), str(message), bool(retryable)


class Fail(Error):
    """The run fails for good: retrying cannot help (bad input, a missing record)."""

    def __init__(self, code, message=""):
        super().__init__(code, message, False)


class Retry(Error):
    """The run fails and the task is tried again later (a dependency's hiccup)."""

    def __init__(self, code, message=""):
        super().__init__(code, message, True)


class Snooze(Exception):
    """Not now: the task is due again after `seconds` (a float; at most 30 days), and this run
    ends `snoozed`: neither a success nor a failure, no attempt used."""

    def __init__(self, seconds):
        super().__init__(f"snooze for {seconds} s")
        self.seconds = max(0.0, float(seconds))


def enqueue(handler, data, *, queue=None, priority=None, delay=None, at=None, unique_key=None, max_attempts=None,
            after=None, run_anyway=False):
    """Queue a task for `handler` with `data` (JSON-able), this task's child, written only if this run
    ends well, so a retried run never queues it twice; returns its number among this run's. `after`:
    numbers returned for tasks this run queued before, which it waits for (a join); one dead or
    cancelled cancels it, unless `run_anyway`."""
    due = None
    if delay is not None:
        due = _types.Due_AfterMs(max(0, int(float(delay) * 1000)))
    elif at is not None:
        due = _types.Due_AtMs(int(float(at) * 1000))
    task = _types.NewTask(
        handler=str(handler), data=_json.dumps(data, separators=(",", ":")), queue=queue, priority=priority,
        due=due, unique_key=unique_key, max_attempts=max_attempts,
    )
    try:
        if after or run_anyway:
            return _host.enqueue_after(task, [int(n) for n in (after or [])], bool(run_anyway))
        return _host.enqueue(task)
    except _Err as e:
        raise Fail("enqueue-refused", e.value) from None


class Dependency:
    """A task this one runs after: its id, handler, whether it succeeded, its last run's results
    (parsed; None: none, or left out) and whether they were left out (past the results limit)."""

    __slots__ = ("id", "handler", "succeeded", "results", "results_left_out")

    def __init__(self, d):
        self.id, self.handler, self.succeeded = d.task_id, d.handler, d.succeeded
        self.results = _json.loads(d.results) if d.results is not None else None
        self.results_left_out = d.results_left_out

    def __repr__(self):
        return f"Dependency(id={self.id}, handler={self.handler!r}, succeeded={self.succeeded})"


def dependencies():
    """The tasks this one runs after, in the order of their ids (a run's tasks: the order queued), each
    with its results while they fit this handler's results limit. Unreadable, raises
    Retry("dependencies-unread", why)."""
    try:
        return [Dependency(d) for d in _host.dependencies()]
    except _Err as e:
        raise Retry("dependencies-unread", e.value) from None


class Waiting(BaseException):
    """Raised by `await_signal` for a signal not sent yet: the run ends waiting for it (not a
    failure). A BaseException, as KeyboardInterrupt is, so that `except Exception` lets it through."""

    def __init__(self, name):
        super().__init__(f"waiting for the signal {name!r}")
        self.signal = name


def await_signal(name, timeout):
    """Wait for the signal `name` sent to this task, for at most `timeout` seconds (1 s to 30 days)
    from the wait's start: its data, parsed, once sent; None once the wait timed out. Not sent yet, raises
    `Waiting`, which ends this run waiting: the task runs again when the signal is sent, or at the
    timeout, and this call then answers. A refused wait raises Fail("invalid-signal-wait", why); the
    database unread, Retry("signal-unread", why)."""
    try:
        found = _host.await_signal(str(name), min(max(0, int(float(timeout) * 1000)), 2**64 - 1))
    except _Err as e:
        if "could not be looked up" in e.value:
            raise Retry("signal-unread", e.value) from None
        raise Fail("invalid-signal-wait", e.value) from None
    if isinstance(found, _types.Signal_Delivered):
        return _json.loads(found.value)
    if isinstance(found, _types.Signal_TimedOut):
        return None
    raise Waiting(str(name))


def progress(percent):
    """Report progress, 0 to 100 percent."""
    _host.set_progress(max(0, min(100, int(percent))))


def partial(results):
    """Store partial results (any JSON-able value) on the run, replacing earlier ones."""
    try:
        _host.set_results(_json.dumps(results, separators=(",", ":")))
    except _Err as e:
        raise ValueError(f"partial results refused: {e.value}") from None


class log:
    """Log lines, stored with the run (past the handler's log limit they are dropped)."""

    @staticmethod
    def debug(message):
        _host.log(_Level.DEBUG, str(message))

    @staticmethod
    def info(message):
        _host.log(_Level.INFO, str(message))

    @staticmethod
    def warning(message):
        _host.log(_Level.WARN, str(message))

    warn = warning

    @staticmethod
    def error(message):
        _host.log(_Level.ERROR, str(message))


# `taskhost.http`: its own file (taskhost_http.py), which needs `Error` above.
from taskhost_http import http  # noqa: E402

_SDK_FILES = (__file__, _sys.modules[http.__module__].__file__)


def _report(e):
    """The exception, then the traceback's frames outside the SDK's files (the last eight), with the
    lines of the handler's files as they were when the component was made."""
    frames = [f for f in _traceback.extract_tb(e.__traceback__, limit=None) if f.filename not in _SDK_FILES]
    exception = "".join(_traceback.format_exception_only(type(e), e)).strip()
    if not frames:
        return exception
    trace = []
    for f in frames[-8:]:
        trace.append(f'  File "{_shown(f.filename)}", line {f.lineno}, in {f.name}')
        lines = _SOURCES.get(f.filename, ())
        if 0 < (f.lineno or 0) <= len(lines):
            trace.append(f"    {lines[f.lineno - 1].strip()}")
        elif f.line:  # a file read at run time (under `taskhost dev`)
            trace.append(f"    {f.line.strip()}")
    return exception + "\nTraceback (most recent call last):\n" + "\n".join(trace)


def _shown(path):
    for base in _BASES:
        if path.startswith(base):
            return path[len(base):]
    return path


def _error(code, message, retryable):
    return _Err(_HandlerError(code=code, message=message, retryable=retryable))


class WitWorld(wit_world.WitWorld):
    def handle(self, task):
        try:
            results = _live_app(task.task_id).handle(Task(task))
        except Waiting:
            # The host holds the wait `await_signal` began: the run ends waiting.
            return None
        except Snooze as e:
            try:
                _host.snooze(int(min(e.seconds, 1e12) * 1000))
            except _Err as refused:
                raise _error("invalid-snooze", refused.value, False) from None
            return None
        except Error as e:
            raise _error(e.code, e.message, e.retryable) from None
        except Exception as e:
            raise _error("uncaught-exception", _report(e), True) from None
        except SystemExit as e:
            # Not Exception's: uncaught, it would stop the interpreter, a trap saying nothing of where.
            where = _report(e).partition("\n")[2]
            message = f"the handler called sys.exit({e.code!r})" + (f"\n{where}" if where else "")
            raise _error("exit", message, False) from None
        if results is None:
            return None
        try:
            return _json.dumps(results, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise _error("invalid-result", f"handle returned what is not JSON: {e}", False) from None


# The handler, imported once when the component is made (its imports, too, cost no run anything).
import app as _app  # noqa: E402

_LIVE = "/taskhost-dev"

if not callable(getattr(_app, "handle", None)):
    raise ImportError("app.py defines no handle(task) function for taskhost to call")


def _keep_sources():
    """The handler's own files are not in the component: their lines are kept now, for tracebacks."""
    import os
    import sys

    bases = [os.path.dirname(_app.__file__) + "/"]
    sources = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if path.endswith(".py") and path.startswith(bases[0]):
            try:
                with open(path, encoding="utf-8") as f:
                    sources[path] = f.read().splitlines()
            except (OSError, ValueError):
                pass
    return bases, sources


def _import_named():
    """Import now, while the component is made, every module the handler's own files name in an
    import anywhere (inside a function too): the component holds no files to import one from at
    run time. One that cannot be imported here (`winreg`, a package not installed) is left to fail
    where the handler imports it, as it would anywhere."""
    import ast
    import importlib
    import os
    import sys

    base = os.path.dirname(_app.__file__) + "/"
    read = set()
    while True:
        own = [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
        todo = sorted(p for p in own if p.endswith(".py") and p.startswith(base) and p not in read)
        if not todo:
            return
        for path in todo:
            read.add(path)
            try:
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
            except (OSError, ValueError, SyntaxError):
                continue
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    # `from x import y`: y may be a submodule of x.
                    names = [node.module] + [node.module + "." + a.name for a in node.names if a.name != "*"]
                for name in names:
                    if name in sys.modules:
                        continue
                    try:
                        importlib.import_module(name)
                    except Exception:  # noqa: BLE001 - not importable here: the handler's own import says why
                        pass


_import_named()
_BASES, _SOURCES = _keep_sources()
_BASES.append(_LIVE + "/")


def _live_app(task_id):
    """The handler as built; under `taskhost dev`, which lends the run a copy of the handler's
    source (read only, at /taskhost-dev), that source as it is now, imported afresh (no build: every
    run starts from the component as it was made). A worker lends nothing, and a queued task (its id
    1 or more; `dev` and `run-once` run task 0) does not even look."""
    import os
    import sys

    if task_id != 0 or not os.path.isdir(_LIVE):
        return _app
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(_BASES[0]):
            del sys.modules[name]
    sys.path.insert(0, _LIVE)
    import app

    return app
