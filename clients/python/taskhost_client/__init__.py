"""A client for taskhost's HTTP API (`taskhost serve`), standard library only: `Client`, and
`AsyncClient` for asyncio applications (`taskhost_client.aio`), the same calls awaited.

Every method is one or a few requests to `BASE/api/v1/...`; answers are the API's JSON as
dicts, typed for type checkers by `taskhost_client.types` (`TaskDetail`, `Task`, `Run`,
`TaskBrief`, ...; the server's own description is `GET /api/openapi.json`). An error answer
raises `TaskhostError` with its status, code and message; a server that cannot be reached raises
`TaskhostError` with status 0 and code `unreachable`.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Tuple, Union

from . import _core, _kept, _stream
from ._core import FINAL_STATES, TASK_FIELDS, Queued, TaskhostError
from .aio import AsyncClient, AsyncEventStream
from .types import Cancelled, Retried, Run, SignalSent, Task, TaskBrief, TaskDetail, TaskInput, TaskState

if TYPE_CHECKING:
    import ssl

__all__ = ["Client", "EventStream", "AsyncClient", "AsyncEventStream", "Queued", "TaskhostError", "FINAL_STATES",
           "TASK_FIELDS", "Cancelled", "Retried", "Run", "SignalSent", "Task", "TaskBrief", "TaskDetail", "TaskInput", "TaskState"]


class Client:
    """Requests to one taskhost server. `token`: an `[api]` token of the server's (a `write` one
    to queue, cancel and retry), or None when the server has none. `timeout`: seconds for a
    request other than a wait's. `ssl_context`: for `https://`, the `ssl.SSLContext` to connect
    with (a CA of your own, a client certificate), else the system's certificates."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: Optional[str] = None,
                 timeout: float = 30.0, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.base_url = _core.api_base(base_url)
        self.token = _core.checked_token(token)
        self.timeout = timeout
        server = _core.server_of(self.base_url)
        # Calls go on connections kept for the next (`_kept`), unless the environment names a
        # proxy for this server (read now, once): then through urllib, as event streams always are.
        proxies = urllib.request.getproxies()
        handlers: List[urllib.request.BaseHandler] = [urllib.request.ProxyHandler(proxies)]
        if ssl_context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=ssl_context))
        self._opener = urllib.request.build_opener(*handlers)
        self._pool: Optional[_kept.Pool] = None
        if ("https" if server.tls else "http") not in proxies or urllib.request.proxy_bypass(server.host):
            tls = ssl_context
            if server.tls and tls is None:
                import ssl

                tls = ssl.create_default_context()
            self._pool = _kept.Pool(server, tls if server.tls else None)

    def close(self) -> None:
        """Close the connections kept for the next calls (a call after opens new ones)."""
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def enqueue(self, handler: str, data: Any = None, **fields: Any) -> int:
        """Queue one task; its id (that of the task holding `unique_key`, when one does).
        `fields`: any of `TASK_FIELDS` but handler and data (`at` and `run_timeout` as the API
        takes them: `"2026-12-01T09:00:00Z"`, `"90s"`)."""
        return int(self._drive(_core.enqueue(handler, data, fields)))

    def enqueue_unique(self, handler: str, data: Any = None, *, unique_key: str, **fields: Any) -> Queued:
        """Queue one task unless a task holds `unique_key` (`unique_for` and `unique_states` say
        for how long and in which states): a `Queued` with the id and whether it was queued."""
        queued: Queued = self._drive(_core.enqueue_unique(handler, data, unique_key, fields))
        return queued

    def enqueue_many(self, tasks: Sequence[TaskInput]) -> List[int]:
        """Queue up to 10,000 tasks (dicts of `TASK_FIELDS`) at once: all or none; their ids, in
        order."""
        return [queued.id for queued in self.enqueue_many_unique(tasks)]

    def enqueue_many_unique(self, tasks: Sequence[TaskInput]) -> List[Queued]:
        """As `enqueue_many`, telling for each task whether this call queued it: a `Queued` each, in
        order (`created` False: a task held its `unique_key`, and `id` is that task's)."""
        queued: List[Queued] = self._drive(_core.enqueue_many_unique(tasks))
        return queued

    def get(self, task_id: int) -> TaskDetail:
        """The task (`task`, with its `state`) and its `runs` (results, error, logs, ...)."""
        detail: TaskDetail = self._drive(_core.get(task_id))
        return detail

    def wait(self, task_id: int, timeout: Optional[float] = 60.0) -> TaskDetail:
        """The task once it is final (succeeded, dead or cancelled), as `get` answers it, asked with
        `?wait=` so that the server answers at its end (no polling). `timeout`: seconds, None for
        no end; past it, `TimeoutError` (its `task` attribute: the task as it was). A server that
        holds as many waits as it may (503 `busy`) is asked again, a moment later each time, while
        the time lasts (the task read meanwhile without `?wait=`); so is one that cannot be
        reached or answers 502, 503 or 504, as while `serve` restarts."""
        detail: TaskDetail = self._drive(_core.wait(task_id, timeout, self.timeout))
        return detail

    def cancel(self, task_id: int, with_children: bool = False) -> Cancelled:
        """Cancel an unfinished task (`TaskhostError` 409 `conflict` when it has finished);
        `with_children`: and every unfinished task under it. `{"id", "cancelled"}`, and
        `"children_cancelled"` (how many) with `with_children`."""
        cancelled: Cancelled = self._drive(_core.cancel(task_id, with_children))
        return cancelled

    def retry(self, task_id: int) -> Retried:
        """Run a finished task again, now. `{"id", "attempt"}`."""
        retried: Retried = self._drive(_core.retry(task_id))
        return retried

    def signal(self, task_id: int, name: str, data: Any = None) -> SignalSent:
        """Send the signal `name` to an unfinished task with `data` (JSON; None sends `{}`): kept
        until a run of it awaits it (`await_signal`); a task awaiting it is due at once.
        `{"id", "woke"}` (`id` the signal's own). 409 `conflict` when the task has finished."""
        sent: SignalSent = self._drive(_core.signal(task_id, name, data))
        return sent

    def events(self, queue: Union[str, Iterable[str], None] = None, handler: Union[str, Iterable[str], None] = None,
               tasks: Optional[Iterable[int]] = None, *, last_event_id: Optional[str] = None,
               reconnect: float = 60.0) -> EventStream:
        """Task events as they happen (`GET /api/v1/events`, Server-Sent Events), opened before this
        returns (a task queued after it is told): yields `("task", brief)` each time a task changes
        (`id`, `queue`, `handler`, `state`, `attempt`, `failures`; `progress` while it runs,
        `finished_on` once final) and `("lagged", {"reason": ...})` when events were lost (read
        again what you show). `queue`, `handler`: a name or names; `tasks`: ids, whose states as
        they are come first. `last_event_id`: go on from a stream's `last_event_id` (what it
        missed is told first); `reconnect`: seconds a broken stream tries to reconnect (0: it
        raises, and ends when the server ends it). See `EventStream`."""
        return EventStream(self, _stream.events_path(queue, handler, tasks), last_event_id, reconnect)

    def _drive(self, plan: _core.Plan) -> Any:
        """Run a plan of calls (see `_core`) to its answer."""
        steps = _core.Steps(plan)
        while not isinstance(action := steps.next(), _core.Done):
            try:
                if isinstance(action, _core.Sleep):
                    time.sleep(action.seconds)
                    steps.did(None)
                elif isinstance(action, _core.Call):
                    steps.did(self._call(action))
                else:
                    raise TypeError(f"not a call's step: {action!r}")
            except TaskhostError as e:
                steps.failed(e)
        return action.answer

    def _call(self, call: _core.Call) -> Any:
        if self._pool is not None:
            return self._call_kept(self._pool, call)
        with self._open(call.method, call.path, call.body, call.timeout or self.timeout, "application/json") as answer:
            try:
                return json.load(answer)
            except (OSError, http.client.HTTPException) as e:
                raise _core.unreachable(self.base_url, e) from None

    def _call_kept(self, pool: _kept.Pool, call: _core.Call) -> Any:
        data = None if call.body is None else json.dumps(call.body).encode()
        headers = {"User-Agent": "taskhost-client", **_core.headers_of(self.token, "application/json", data is not None)}
        try:
            connection, answer = pool.request(call.method, pool.server.target(call.path), data, headers,
                                              call.timeout or self.timeout)
            try:
                body = answer.read()
            except BaseException:
                connection.close()
                raise
        except (OSError, http.client.HTTPException) as e:
            raise _core.unreachable(self.base_url, e) from None
        pool.done(connection, answer)
        if not 200 <= answer.status < 300:
            raise _core.error_of(answer.status, body, answer.reason)
        return json.loads(body)

    def _open(self, method: str, path: str, body: Any, timeout: float, accept: str,
              headers: Optional[dict[str, str]] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + "/api/v1" + path, data=data, method=method,
                                         headers=_core.headers_of(self.token, accept, data is not None, headers))
        try:
            return self._opener.open(request, timeout=timeout)
        except urllib.error.HTTPError as e:
            raise _core.error_of(e.code, e.read(), f"{e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise _core.unreachable(self.base_url, getattr(e, "reason", e)) from None


class EventStream(_stream.Stream):
    """An open event stream (`Client.events`): iterate it for `(kind, data)`; `close()` to leave
    (or use it in a `with`). `last_event_id`: the id of the last look it was told (None before
    the first), which `Client.events(last_event_id=...)` goes on from, in this process or another.

    When the stream breaks or the server ends it, it reconnects by itself, sending that id
    (`Last-Event-ID`): the server first tells what it missed, or `("lagged", {"reason":
    "resume"})` when it cannot (a server restarted, or away longer than the server keeps), and
    so does the stream itself when it broke before it had an id. It tries for `reconnect`
    seconds, then raises `TaskhostError` `unreachable`; with `reconnect=0` a break raises at
    once and the server's end ends the iteration."""

    def __init__(self, client: Client, path: str, last_event_id: Optional[str], reconnect: float) -> None:
        super().__init__(last_event_id, reconnect)
        self._client, self._path = client, path
        # Opened before `events` returns: a task queued after it is told.
        self._answer: Any = None
        opening = _core.Steps(_stream.opening(self._state))
        while not isinstance(action := opening.next(), _core.Done):
            try:
                opening.did(self._step(action))
            except TaskhostError as e:
                opening.failed(e)

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Tuple[str, Any]:
        """`("task", brief)`, a `TaskBrief`, or `("lagged", {"reason": ...})`: typed `Any` so
        that a brief is read as a `TaskBrief` once `kind` says it is one."""
        while not isinstance(action := self._next(), _core.Done):
            if isinstance(action, _core.Told):
                return _stream.told(action)
            try:
                self._steps.did(self._step(action))
            except TaskhostError as e:
                self._steps.failed(e)
        self._answer.close()
        raise StopIteration

    def _next(self) -> Union[_core.Action, _core.Done]:
        try:
            return self._steps.next()
        except BaseException:
            # The plan ended by an error (an event that is not JSON, ...): its connection with it.
            self._answer.close()
            raise

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self._state.closed = True
        # A read blocked in another thread holds the answer's lock until data comes (the server's
        # comment, 15 s): the socket shut first ends that read at once.
        sock = _socket_of(self._answer)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._answer.close()
        try:
            self._plan.close()
        except ValueError:
            # Iterated in another thread now: its read fails on the closed answer and it ends.
            pass

    def _step(self, action: _core.Action) -> Any:
        if isinstance(action, _core.Read):
            try:
                return self._answer.readline() or None
            except Exception as e:
                # Closed from another thread meanwhile (http.client may fail in any way then): the end.
                if self._state.closed:
                    return None
                if not isinstance(e, (OSError, ValueError, http.client.HTTPException)):
                    raise
                raise _core.unreachable(self._client.base_url, f"the event stream broke: {e}") from None
        if isinstance(action, _core.Close):
            self._answer.close()
        elif isinstance(action, _core.Sleep):
            time.sleep(action.seconds)
        elif isinstance(action, _core.Connect):
            self._answer = self._connect(action.within)
        else:
            raise TypeError(f"not a stream's step: {action!r}")
        return None

    def _connect(self, within: Optional[float]) -> Any:
        last = self._state.last_event_id
        headers = {} if last is None else {"Last-Event-ID": last}
        timeout = _stream.connect_timeout(self._client.timeout, within)
        answer = self._client._open("GET", self._path, None, timeout, "text/event-stream", headers)
        # Answered: its reads wait the whole minute again (the server's comment comes every 15 s),
        # not what was left of a reconnect's time, which would break a quiet stream and reconnect it
        # again and again without end.
        sock = _socket_of(answer)
        if sock is not None:
            sock.settimeout(_stream.connect_timeout(self._client.timeout, None))
        return answer


def _socket_of(answer: Any) -> Optional[socket.socket]:
    """The socket under urllib's answer (http.client's), when it is where CPython keeps it."""
    sock = getattr(getattr(getattr(answer, "fp", None), "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None
