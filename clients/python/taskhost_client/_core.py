"""What `Client` and `AsyncClient` share: the calls as plans, written once without I/O.

A plan is a generator that yields what it needs done (`Call` a route, `Sleep`, and for an event
stream `Read` a line, `Connect` again, `Close`, `Told` an event) and is sent each result, or
thrown the `TaskhostError` it raised; what it returns is the call's answer. Each client drives
plans with its own I/O (urllib and `time.sleep`; asyncio's streams and `asyncio.sleep`), so how
a wait asks again or a stream reconnects is decided here alone (an event stream's plans are in
`_stream`).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import Any, Dict, Generator, Iterable, NamedTuple, Optional, Union, cast

from .types import Cancelled, Retried, SignalSent, TaskDetail, TaskInput

#: A task in one of these states will not run again unless someone replays it.
FINAL_STATES = frozenset({"succeeded", "dead", "cancelled"})

#: The fields of a task to queue, as the API's `TaskInput` names them: `types.TaskInput`'s keys,
#: in order (checked against the server's OpenAPI document by taskhost's tests).
TASK_FIELDS = tuple(TaskInput.__annotations__)

#: The longest one `?wait=` the server takes, in seconds; longer waits are asked again.
MAX_WAIT_SECONDS = 60
# A wait's request is given up on this long after its deadline when the server has not answered.
WAIT_GRACE = 2.0


class TaskhostError(Exception):
    """An error answer of the API: `status` (HTTP), `code` (stable: `invalid`, `unknown-handler`,
    `not-found`, `conflict`, `deleted`, `unauthorized`, `forbidden`, `busy`, `unavailable`, ...), `message`.
    410 `deleted`: the task succeeded and its queue deleted it (`on_success = delete`); only that is kept."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    #: Unreachable for a reason no retry mends (`unreachable` sets it): a wait or a stream's
    #: reconnect raises it at once rather than asking again while its time lasts.
    _lasting = False


class Queued(NamedTuple):
    """What `enqueue_unique` (or `enqueue_many_unique`, for each task) did: the task's id, and
    whether this call queued it (False: a task held the unique key, and `id` is that task's)."""

    id: int
    created: bool


class Call(NamedTuple):
    """A request to `BASE/api/v1` + `path`; its answer's JSON is sent back. `timeout`: seconds,
    None for the client's own."""

    method: str
    path: str
    body: Any = None
    timeout: Optional[float] = None


class Sleep(NamedTuple):
    seconds: float


class Read(NamedTuple):
    """The event stream's next line (bytes), None at its end; a break raises `unreachable`."""


class Connect(NamedTuple):
    """Open the event stream (again), the answer waited for at most `within` seconds (at least 5;
    None: as long as a stream's read)."""

    within: Optional[float]


class Close(NamedTuple):
    """Let go of the event stream's connection."""


class Told(NamedTuple):
    """An event for the stream's reader: `("task", brief)` or `("lagged", {"reason": ...})`."""

    kind: str
    data: Any


Action = Union[Call, Sleep, Read, Connect, Close, Told]
Plan = Generator[Action, Any, Any]


class Done(NamedTuple):
    """A plan's end: its answer."""

    answer: Any


class Steps:
    """A plan run a step at a time by a client: `next()` is its next action, sent the last one's
    result (`did`) or thrown its error (`failed`, a `TaskhostError`, which the plan may take), or
    `Done`. An action neither did nor failed (its await cancelled, an interrupt) is the next
    again: a stream read when a reader's `wait_for` ran out goes on where it was."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.pending: Optional[Action] = None
        self._value: Any = None
        self._error: Optional[TaskhostError] = None

    def next(self) -> Union[Action, Done]:
        if self.pending is not None:
            return self.pending
        value, error, self._value, self._error = self._value, self._error, None, None
        try:
            action = self.plan.send(value) if error is None else self.plan.throw(error)
        except StopIteration as done:
            return Done(done.value)
        if not isinstance(action, Told):
            self.pending = action
        return action

    def did(self, value: Any) -> None:
        self.pending, self._value = None, value

    def failed(self, error: TaskhostError) -> None:
        self.pending, self._error = None, error


def unreachable(base_url: str, reason: object) -> TaskhostError:
    # (http.client's own words, "Remote end closed connection without response", say less.)
    if isinstance(reason, http.client.RemoteDisconnected):
        reason = "the server closed the connection without an answer"
    elif isinstance(reason, http.client.IncompleteRead):
        reason = "the server closed the connection before the end of its answer"
    error = TaskhostError(0, "unreachable", f"{base_url}: {reason}")
    error._lasting = lasting(reason)
    return error


def lasting(reason: object) -> bool:
    """Whether a connection failed for a reason that asking again does not mend: the server's
    certificate not trusted, or TLS spoken to a server that does not speak it. (A name the DNS
    does not know may be a restarting server's, as a headless service's without a ready pod: it
    is asked again.)"""
    if getattr(reason, "lasting", False) is True:  # (the asyncio client's `_http.Broken` says)
        return True
    try:
        import ssl
    except ImportError:  # a Python built without it: http:// alone
        return False
    if isinstance(reason, ssl.SSLCertVerificationError):
        return True
    return isinstance(reason, ssl.SSLError) and reason.reason in (
        "WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG")


def passing(e: TaskhostError) -> bool:
    """Whether `e` may pass if asked again: a server away (for no reason that lasts), or behind a
    proxy answering 502, 503 or 504 (`serve` restarting)."""
    return e.status in (502, 503, 504) or (e.status == 0 and not e._lasting)


def error_of(status: int, body: bytes, reason: str) -> TaskhostError:
    """The `TaskhostError` of an error answer: its JSON's code and message, or the status's reason."""
    try:
        error = json.loads(body)["error"]
        return TaskhostError(status, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return TaskhostError(status, "http", reason)


def headers_of(token: Optional[str], accept: str, has_body: bool,
               extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    headers = {"Accept": accept}
    if has_body:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer " + token
    headers.update(extra or {})
    return headers


def checked_token(token: Optional[str]) -> Optional[str]:
    """A token as given, refused (`ValueError`, without its text) when a header cannot carry it."""
    if token is not None and (not isinstance(token, str) or any(c in token for c in "\r\n\0")):
        raise ValueError("the token is not text a header can carry (a line break or NUL in it?)")
    return token


def api_base(base_url: str) -> str:
    """The server's base URL as given, without a trailing `/` or `/api/v1`."""
    base = base_url.rstrip("/")
    return base[: -len("/api/v1")] if base.endswith("/api/v1") else base


#: Connections kept for the next call, by each client: at most this many idle ones, each for at most
#: `KEPT_FOR` seconds (under `taskhost serve`'s 10 s for a request's head, past which it closes an
#: idle connection).
KEPT_IDLE = 8
KEPT_FOR = 4.0


class Server(NamedTuple):
    """Where a base URL's requests go: `tls` for https://, `netloc` for the `Host` header (no
    user or password), `prefix` the path before `/api/v1`."""
    tls: bool
    host: str
    port: int
    netloc: str
    prefix: str

    def target(self, path: str) -> str:
        """A request line's target: `path` under `/api/v1`."""
        return urllib.parse.quote(self.prefix + "/api/v1", safe="/%") + path


def server_of(base_url: str) -> Server:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{base_url}: not an http:// or https:// URL")
    tls = parts.scheme == "https"
    return Server(tls, parts.hostname, parts.port or (443 if tls else 80), parts.netloc.rsplit("@", 1)[-1], parts.path)


def task_body(handler: Optional[str], data: Any, fields: Dict[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(fields) - set(TASK_FIELDS))
    if unknown:
        raise TypeError(f"not a field of a task: {', '.join(unknown)} (fields: {', '.join(TASK_FIELDS)})")
    # A task without a handler goes without one: the server names the missing field.
    task: Dict[str, Any] = {} if handler is None else {"handler": handler}
    if data is not None:
        task["data"] = data
    task.update({k: v for k, v in fields.items() if v is not None})
    return task


def enqueue(handler: str, data: Any, fields: Dict[str, Any]) -> Plan:
    return int((yield Call("POST", "/tasks", task_body(handler, data, fields)))["id"])


def enqueue_unique(handler: str, data: Any, unique_key: str, fields: Dict[str, Any]) -> Plan:
    if not isinstance(unique_key, str):
        raise TypeError(f"enqueue_unique: unique_key must be text, not {type(unique_key).__name__}")
    answer = yield Call("POST", "/tasks", task_body(handler, data, dict(fields, unique_key=unique_key)))
    return Queued(int(answer["id"]), bool(answer["created"]))


def enqueue_many_unique(tasks: Iterable[TaskInput]) -> Plan:
    batch = [task_body(t.get("handler"), t.get("data"), {k: v for k, v in t.items() if k not in ("handler", "data")})
             for t in tasks]
    added = (yield Call("POST", "/tasks", {"tasks": batch}))["tasks"]
    return [Queued(int(a["id"]), bool(a["created"])) for a in added]


def get(task_id: int) -> Plan:
    return cast(TaskDetail, (yield Call("GET", f"/tasks/{task_id_of(task_id)}")))


def cancel(task_id: int, with_children: bool) -> Plan:
    query = "?with_children=true" if with_children else ""
    return cast(Cancelled, (yield Call("POST", f"/tasks/{task_id_of(task_id)}/cancel{query}")))


def retry(task_id: int) -> Plan:
    return cast(Retried, (yield Call("POST", f"/tasks/{task_id_of(task_id)}/retry")))


def signal(task_id: int, name: str, data: Any) -> Plan:
    if not isinstance(name, str) or not name:
        raise TypeError(f"signal: the name is text, not {name!r}")
    if name in (".", ".."):  # as Node's: a path's dot segment, which a proxy may resolve
        raise TypeError(f"signal: a signal named {name} cannot be sent in a URL's path")
    path = f"/tasks/{task_id_of(task_id)}/signals/{urllib.parse.quote(name, safe='')}"
    return cast(SignalSent, (yield Call("POST", path, {} if data is None else data)))


def wait(task_id: int, timeout: Optional[float], request_timeout: float) -> Plan:
    """`Client.wait`: `?wait=` at most a minute at a time; a server holding all the waits it may
    (503 `busy`) still answers a plain read: the task is read so, and the wait asked again a
    moment later while the time lasts, as a stream reconnects. A server that cannot be reached
    or answers 502, 503 or 504 (`serve` restarting: it answers its waits as it stops) is asked
    again while the time lasts (a minute from the last answer without a timeout), a quarter
    second then each second, and its last error raised when it runs out."""
    if timeout is not None and not timeout >= 0:
        raise ValueError(f"wait(timeout={timeout!r}): seconds, at least 0 (None: no end)")
    deadline = None if timeout is None else time.monotonic() + timeout
    pause, gone_until, away, plain = 0.1, None, 0.25, False
    while True:
        left = MAX_WAIT_SECONDS if deadline is None else deadline - time.monotonic()
        wait_ms = max(0, min(int(left * 1000), MAX_WAIT_SECONDS * 1000))
        # The ask that reaches the deadline is given up on soon after it if the server takes it
        # and never answers, not a whole request timeout after it.
        last = deadline is not None and left <= MAX_WAIT_SECONDS
        limit = wait_ms / 1000 + (min(request_timeout, WAIT_GRACE) if last else request_timeout)
        path = f"/tasks/{task_id_of(task_id)}" + ("" if plain else f"?wait={wait_ms}ms")
        try:
            shown = yield Call("GET", path, None, None if plain else limit)
        except TaskhostError as e:
            if e.code == "busy" and not plain:
                plain = True
                continue
            if not passing(e) or e.code == "busy":
                raise
            now = time.monotonic()
            if gone_until is None:
                gone_until = deadline if deadline is not None else now + MAX_WAIT_SECONDS
            if now >= gone_until:
                raise
            yield Sleep(min(away, gone_until - now))
            away = 1.0
            continue
        gone_until, away = None, 0.25
        if shown["task"]["state"] in FINAL_STATES:
            return cast(TaskDetail, shown)
        if plain:
            plain = False
            remaining = None if deadline is None else deadline - time.monotonic()
            yield Sleep(pause if remaining is None else max(0.0, min(pause, remaining)))
            pause = min(pause * 2, 2.0)
            if deadline is None or time.monotonic() < deadline:
                continue
        if deadline is not None and time.monotonic() >= deadline:
            error = TimeoutError(f"task {task_id} is still {shown['task']['state']} after {timeout} s")
            error.task = shown  # type: ignore[attr-defined]
            raise error


def task_id_of(value: Any) -> int:
    """A task's id as given: an int, or its digits as text; anything else (a float, a bool,
    None) is refused rather than read as another task's id."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise TypeError(f"not a task id: {value!r}")
