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
  `uncaught-exception` (retried), its message the exception, then the traceback's frames in your files.
- `taskhost.progress(percent)`, `taskhost.partial(results)`, `taskhost.log.info(...)` (and `.debug`,
  `.warning`, `.error`); what `print` writes lands in the run's logs too.
- `taskhost.http.get/post/put/patch/delete/request(...)`: a subset of `requests` over wasi:http, sent
  where the operator's grant for this handler allows. A refused or failed request raises an
  `http.RequestError` that, uncaught, ends the run with its code (`request-denied`, `request-timeout`,
  `response-too-large`, `request-failed`); `raise_for_status()` raises `http.HTTPError` (`http-5xx`,
  retried; `http-4xx`, not, but for 408 and 429).

wasi:http resources are freed children first (a body's stream before the body, a pollable before
its future): freeing a parent first traps the run with "resource has children".
"""
import json as _json
import re as _re
import traceback as _traceback
from urllib.parse import urlencode as _urlencode, urlsplit as _urlsplit

import wit_world
from componentize_py_types import Err as _Err, Ok as _Ok
from wit_world.imports import host as _host, outgoing_handler as _outgoing
from wit_world.imports import wasi_http_types as _wh
from wit_world.imports.streams import StreamError_Closed as _Closed
from wit_world.imports.taskhost_plugin_types import HandlerError as _HandlerError, LogLevel as _Level

__all__ = ["Task", "Error", "Fail", "Retry", "progress", "partial", "log", "http"]


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


class Response:
    """An answer: `.status`, `.headers` (lower-case names), `.content` (bytes), `.text`, `.json()`."""

    def __init__(self, method, url, status, headers, content):
        self.method, self.url, self.status, self.headers, self.content = method, url, status, headers, content

    @property
    def status_code(self):
        return self.status

    @property
    def ok(self):
        return self.status < 400

    @property
    def text(self):
        charset = _re.search(r"charset=([\w-]+)", self.headers.get("content-type", ""))
        try:
            return self.content.decode(charset.group(1) if charset else "utf-8", "replace")
        except LookupError:
            return self.content.decode("utf-8", "replace")

    def json(self):
        return _json.loads(self.content)

    def raise_for_status(self):
        """Raise `http.HTTPError` for a 4xx or 5xx answer."""
        if self.status >= 400:
            raise HTTPError(self)

    def __repr__(self):
        return f"<Response {self.status} from {self.method} {self.url}>"


class RequestError(Error):
    """A request that got no answer: refused by the host, timed out, or failed on the way."""

    def __init__(self, code, message, retryable):
        super().__init__(code, message, retryable)


class HTTPError(RequestError):
    """A 4xx or 5xx answer, from `Response.raise_for_status()`: `.response` is the answer."""

    def __init__(self, response):
        status, retryable = response.status, response.status >= 500 or response.status in (408, 429)
        code = "http-5xx" if status >= 500 else "http-4xx"
        message = f"{response.method} {response.url} answered {status}: {response.text[:500]}"
        super().__init__(code, message, retryable)
        self.response = response


class Timeout(RequestError):
    """No connection, or no answer, within the request's timeout."""


_TIMEOUTS = {"ConnectionTimeout", "ConnectionReadTimeout", "ConnectionWriteTimeout", "HttpResponseTimeout", "DnsTimeout"}


def _failure(method, url, code):
    """The RequestError for a wasi:http error code."""
    name = type(code).__name__.replace("ErrorCode_", "") if code is not None else "InternalError"
    what = _re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()
    detail = getattr(code, "value", None)
    if isinstance(detail, str) and detail:
        what = f"{what}: {detail}"
    where = f"{method} {url}"
    if name == "HttpRequestDenied":
        return RequestError("request-denied", f"{where}: not granted to this handler by the operator", False)
    if name in _TIMEOUTS:
        return Timeout("request-timeout", f"{where}: {what}", True)
    if name == "HttpResponseBodySize":
        return RequestError("response-too-large", f"{where}: the response is over this handler's limit", False)
    return RequestError("request-failed", f"{where}: {what}", True)


def _broken(method, url, error):
    """The RequestError for a body that broke off: wasi:http gives no code for one, only text."""
    text = error.to_debug_string()[:300]
    if "body size exceeds limit" in text:
        return RequestError("response-too-large", f"{method} {url}: the response is over this handler's limit", False)
    if "timeout" in text or "timed out" in text:
        return Timeout("request-timeout", f"{method} {url}: reading the response: {text}", True)
    return RequestError("request-failed", f"{method} {url}: reading the response: {text}", True)


def _drop(resource):
    resource.__exit__(None, None, None)


def _send(method, url, body, headers, timeout):
    """Start the request and write its body; the future response."""
    parts = _urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RequestError("request-failed", f"{method} {url}: not an http:// or https:// URL", False)
    try:
        fields = _wh.Fields.from_list([(k, v.encode("latin-1")) for k, v in headers.items()])
    except (_Err, UnicodeEncodeError) as e:
        raise RequestError("request-failed", f"{method} {url}: a header is refused ({e})", False) from None
    request = _wh.OutgoingRequest(fields)
    try:
        request.set_method(_METHODS[method]() if method in _METHODS else _wh.Method_Other(method))
        request.set_scheme(_wh.Scheme_Https() if parts.scheme == "https" else _wh.Scheme_Http())
        request.set_authority(parts.netloc)
        request.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    except _Err:
        _drop(request)
        raise RequestError("request-failed", f"{method} {url}: the host refused its method or URL", False) from None
    outgoing = request.body()
    options = None
    if timeout is not None:
        ns = max(1, int(timeout * 1e9))
        options = _wh.RequestOptions()
        options.set_connect_timeout(ns)
        options.set_first_byte_timeout(ns)
        options.set_between_bytes_timeout(ns)
    try:
        future = _outgoing.handle(request, options)
    except _Err as e:
        _drop(outgoing)
        raise _failure(method, url, e.value) from None
    try:
        with outgoing.write() as stream:
            for start in range(0, len(body), 4096):
                stream.blocking_write_and_flush(body[start:start + 4096])
        _wh.OutgoingBody.finish(outgoing, None)
    except _Err:
        pass  # the host stopped taking the body: the answer says why
    return future


def _read(method, url, response):
    """The status, headers and whole body of an answer, freeing its resources."""
    status = response.status()
    with response.headers() as fields:
        headers = {}
        for name, value in fields.entries():
            value = value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    content = bytearray()
    incoming = response.consume()
    failed = None
    with incoming.stream() as stream:
        while True:
            try:
                content += stream.blocking_read(64 * 1024)
            except _Err as e:
                if not isinstance(e.value, _Closed):
                    with e.value.value as error:
                        code = _wh.http_error_code(error)
                        failed = _failure(method, url, code) if code else _broken(method, url, error)
                break
    _drop(_wh.IncomingBody.finish(incoming))
    if failed:
        raise failed
    return Response(method, url, status, headers, bytes(content))


def request(method, url, *, params=None, json=None, data=None, headers=None, timeout=30):
    """Send a request and read the whole answer. `params`: added to the URL's query; `json`: a
    body sent as JSON; `data`: bytes, text or a form (a dict); `timeout`: seconds to connect, to
    the first byte and between bytes (None: the host's limits only)."""
    method = method.upper()
    if params:
        url += ("&" if "?" in url else "?") + _urlencode(params, doseq=True)
    sent = {"user-agent": "taskhost"}
    body = b""
    if json is not None:
        body, sent["content-type"] = _json.dumps(json, separators=(",", ":")).encode(), "application/json"
    elif isinstance(data, dict):
        body, sent["content-type"] = _urlencode(data, doseq=True).encode(), "application/x-www-form-urlencoded"
    elif data is not None:
        body = data.encode() if isinstance(data, str) else bytes(data)
    for name, value in (headers or {}).items():
        sent[name.lower()] = str(value)
    if body or method in ("POST", "PUT", "PATCH"):
        sent["content-length"] = str(len(body))
    future = _send(method, url, body, sent, timeout)
    with future:
        with future.subscribe() as ready:
            ready.block()
        answer = future.get()
        if not isinstance(answer, _Ok):
            raise RequestError("request-failed", f"{method} {url}: no response", True)
        if not isinstance(answer.value, _Ok):
            raise _failure(method, url, answer.value.value)
        response = answer.value.value
        try:
            return _read(method, url, response)
        finally:
            _drop(response)


_METHODS = {
    "GET": _wh.Method_Get, "HEAD": _wh.Method_Head, "POST": _wh.Method_Post, "PUT": _wh.Method_Put,
    "DELETE": _wh.Method_Delete, "PATCH": _wh.Method_Patch, "OPTIONS": _wh.Method_Options,
}


class http:
    """HTTP requests, where the operator's grant allows (`[handlers.NAME.grants.http]`)."""

    request = staticmethod(request)
    Response, RequestError, HTTPError, Timeout = Response, RequestError, HTTPError, Timeout

    @staticmethod
    def get(url, **kwargs):
        return request("GET", url, **kwargs)

    @staticmethod
    def post(url, **kwargs):
        return request("POST", url, **kwargs)

    @staticmethod
    def put(url, **kwargs):
        return request("PUT", url, **kwargs)

    @staticmethod
    def patch(url, **kwargs):
        return request("PATCH", url, **kwargs)

    @staticmethod
    def delete(url, **kwargs):
        return request("DELETE", url, **kwargs)


def _report(e):
    """The exception, then the traceback's frames outside this file (the last eight), with the
    lines of the handler's files as they were when the component was made."""
    frames = [f for f in _traceback.extract_tb(e.__traceback__, limit=None) if f.filename != __file__]
    exception = "".join(_traceback.format_exception_only(type(e), e)).strip()
    if not frames:
        return exception
    trace = []
    for f in frames[-8:]:
        trace.append(f'  File "{_shown(f.filename)}", line {f.lineno}, in {f.name}')
        lines = _SOURCES.get(f.filename, ())
        if 0 < (f.lineno or 0) <= len(lines):
            trace.append(f"    {lines[f.lineno - 1].strip()}")
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
            results = _app.handle(Task(task))
        except Error as e:
            raise _error(e.code, e.message, e.retryable) from None
        except Exception as e:
            raise _error("uncaught-exception", _report(e), True) from None
        if results is None:
            return None
        try:
            return _json.dumps(results, separators=(",", ":"))
        except (TypeError, ValueError) as e:
            raise _error("invalid-result", f"handle returned what is not JSON: {e}", False) from None


# The handler, imported once when the component is made (its imports, too, cost no run anything).
import app as _app  # noqa: E402

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


_BASES, _SOURCES = _keep_sources()
