"""taskhost's Python SDK, its HTTP part: `taskhost.http`, a subset of `requests` over wasi:http (see
taskhost.py). Imported by taskhost.py, after its `Error`.

wasi:http resources are freed children first (a body's stream before the body, a pollable before
its future): freeing a parent first traps the run with "resource has children".
"""
import json as _json
import re as _re
from urllib.parse import urlencode as _urlencode, urlsplit as _urlsplit

from componentize_py_types import Err as _Err, Ok as _Ok
from wit_world.imports import outgoing_handler as _outgoing
from wit_world.imports import wasi_http_types as _wh
from wit_world.imports.streams import StreamError_Closed as _Closed

from taskhost import Error, Snooze

# Busy answers without a Retry-After are tried again after this many seconds; a server's longer
# Retry-After is cut to the longest snooze the host takes (30 days).
_BUSY_SECONDS = 10.0
_LONGEST_SNOOZE = 30 * 24 * 3600.0


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

    def snooze_if_busy(self):
        """Raise `taskhost.Snooze` for a 429 or 503 answer: the task is due again after its
        `Retry-After` (seconds or an HTTP date; 10 s without one), the run not a failure."""
        if self.status in (429, 503):
            raise Snooze(min(_retry_after(self.headers.get("retry-after"), _BUSY_SECONDS), _LONGEST_SNOOZE))
        return self

    def __repr__(self):
        return f"<Response {self.status} from {self.method} {self.url}>"


def _retry_after(value, default):
    """Seconds a `Retry-After` asks for: a number of seconds, or an HTTP date from now."""
    if not value:
        return default
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), _LONGEST_SNOOZE)
    try:
        import time
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (ImportError, TypeError, ValueError, IndexError, OverflowError):
        return default


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
