"""A client for taskhost's HTTP API (`taskhost serve`), standard library only.

Every method is one or a few requests to `BASE/api/v1/...`; answers are the API's JSON as
dicts, typed for type checkers by `taskhost_client.types` (`TaskDetail`, `Task`, `Run`,
`TaskBrief`, ...; the server's own description is `GET /api/openapi.json`). An error answer
raises `TaskhostError` with its status, code and message; a server that cannot be reached raises
`TaskhostError` with status 0 and code `unreachable`.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Generator, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

from .types import Cancelled, Retried, Run, Task, TaskBrief, TaskDetail, TaskInput, TaskState

__all__ = ["Client", "EventStream", "Queued", "TaskhostError", "FINAL_STATES", "TASK_FIELDS", "Cancelled", "Retried",
           "Run", "Task", "TaskBrief", "TaskDetail", "TaskInput", "TaskState"]

#: A task in one of these states will not run again unless someone replays it.
FINAL_STATES = frozenset({"succeeded", "dead", "cancelled"})

#: The fields of a task to queue, as the API's `TaskInput` names them: `types.TaskInput`'s keys,
#: in order (checked against the server's OpenAPI document by taskhost's tests).
TASK_FIELDS = tuple(TaskInput.__annotations__)

#: The longest one `?wait=` the server takes, in seconds; longer waits are asked again.
_MAX_WAIT_SECONDS = 60


class TaskhostError(Exception):
    """An error answer of the API: `status` (HTTP), `code` (stable: `invalid`, `unknown-handler`,
    `not-found`, `conflict`, `deleted`, `unauthorized`, `forbidden`, `busy`, `unavailable`, ...), `message`.
    410 `deleted`: the task succeeded and its queue deleted it (`on_success = delete`); only that is kept."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Queued(NamedTuple):
    """What `Client.enqueue_unique` did: the task's id, and whether this call queued it (False: a
    task held the unique key, and `id` is that task's)."""

    id: int
    created: bool


class Client:
    """Requests to one taskhost server. `token`: an `[api]` token of the server's (a `write` one
    to queue, cancel and retry), or None when the server has none. `timeout`: seconds for a
    request other than a wait's."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: Optional[str] = None,
                 timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/api/v1"):
            self.base_url = self.base_url[: -len("/api/v1")]
        self.token = token
        self.timeout = timeout

    def enqueue(self, handler: str, data: Any = None, **fields: Any) -> int:
        """Queue one task; its id (that of the task holding `unique_key`, when one does).
        `fields`: any of `TASK_FIELDS` but handler and data (`at` and `run_timeout` as the API
        takes them: `"2026-12-01T09:00:00Z"`, `"90s"`)."""
        task = self._task(handler, data, fields)
        return int(self._call("POST", "/tasks", task)["id"])

    def enqueue_unique(self, handler: str, data: Any = None, *, unique_key: str, **fields: Any) -> Queued:
        """Queue one task unless a task holds `unique_key` (`unique_for` and `unique_states` say
        for how long and in which states): a `Queued` with the id and whether it was queued."""
        if not isinstance(unique_key, str):
            raise TypeError(f"enqueue_unique: unique_key must be text, not {type(unique_key).__name__}")
        answer = self._call("POST", "/tasks", self._task(handler, data, dict(fields, unique_key=unique_key)))
        return Queued(int(answer["id"]), bool(answer["created"]))

    def enqueue_many(self, tasks: Sequence[TaskInput]) -> List[int]:
        """Queue up to 10,000 tasks (dicts of `TASK_FIELDS`) at once: all or none; their ids, in
        order."""
        batch = [self._task(t.get("handler", ""), t.get("data"), {k: v for k, v in t.items()
                                                                   if k not in ("handler", "data")})
                 for t in tasks]
        return [int(a["id"]) for a in self._call("POST", "/tasks", {"tasks": batch})["tasks"]]

    def get(self, task_id: int) -> TaskDetail:
        """The task (`task`, with its `state`) and its `runs` (results, error, logs, ...)."""
        return cast(TaskDetail, self._call("GET", f"/tasks/{int(task_id)}"))

    def wait(self, task_id: int, timeout: Optional[float] = 60.0) -> TaskDetail:
        """The task once it is final (succeeded, dead or cancelled), as `get` answers it, asked with
        `?wait=` so that the server answers at its end (no polling). `timeout`: seconds, None for
        no end; past it, `TimeoutError` (its `task` attribute: the task as it was). A server that
        holds as many waits as it may (503 `busy`) is asked again, a moment later each time, while
        the time lasts (the task read meanwhile without `?wait=`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.1
        while True:
            left = _MAX_WAIT_SECONDS if deadline is None else deadline - time.monotonic()
            wait_ms = max(0, min(int(left * 1000), _MAX_WAIT_SECONDS * 1000))
            try:
                shown = self._call("GET", f"/tasks/{int(task_id)}?wait={wait_ms}ms",
                                   timeout=wait_ms / 1000 + self.timeout)
            except TaskhostError as e:
                # A server holding all the waits it may (503 `busy`) still answers a plain read:
                # the task is read so, and the wait asked again a moment later while the time
                # lasts, as a stream reconnects.
                if e.code != "busy":
                    raise
                shown = self.get(task_id)
                if shown["task"]["state"] not in FINAL_STATES:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    time.sleep(pause if remaining is None else max(0.0, min(pause, remaining)))
                    pause = min(pause * 2, 2.0)
                    if deadline is None or time.monotonic() < deadline:
                        continue
            if shown["task"]["state"] in FINAL_STATES:
                return cast(TaskDetail, shown)
            if deadline is not None and time.monotonic() >= deadline:
                error = TimeoutError(f"task {task_id} is still {shown['task']['state']} after {timeout} s")
                error.task = shown  # type: ignore[attr-defined]
                raise error

    def cancel(self, task_id: int, with_children: bool = False) -> Cancelled:
        """Cancel an unfinished task (`TaskhostError` 409 `conflict` when it has finished);
        `with_children`: and every unfinished task under it. `{"id", "cancelled"}`, and
        `"children_cancelled"` (how many) with `with_children`."""
        query = "?with_children=true" if with_children else ""
        return cast(Cancelled, self._call("POST", f"/tasks/{int(task_id)}/cancel{query}"))

    def retry(self, task_id: int) -> Retried:
        """Run a finished task again, now. `{"id", "attempt"}`."""
        return cast(Retried, self._call("POST", f"/tasks/{int(task_id)}/retry"))

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
        params = {}
        for name, value in (("queue", queue), ("handler", handler), ("task", tasks)):
            if value is not None:
                values = [value] if isinstance(value, (str, int)) else list(value)
                if not values:
                    # An empty list would be no filter at all, the server's every task.
                    raise ValueError(f"events({name}=[]): an empty list follows nothing; pass None for all")
                params[name] = ",".join(str(v) for v in values)
        query = "?" + urllib.parse.urlencode(params) if params else ""
        return EventStream(self, "/events" + query, last_event_id, reconnect)

    @staticmethod
    def _task(handler: str, data: Any, fields: Dict[str, Any]) -> Dict[str, Any]:
        unknown = sorted(set(fields) - set(TASK_FIELDS))
        if unknown:
            raise TypeError(f"not a field of a task: {', '.join(unknown)} (fields: {', '.join(TASK_FIELDS)})")
        task: Dict[str, Any] = {"handler": handler}
        if data is not None:
            task["data"] = data
        task.update({k: v for k, v in fields.items() if v is not None})
        return task

    def _call(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Any:
        with self._open(method, path, body, timeout or self.timeout, "application/json") as answer:
            try:
                return json.load(answer)
            except (OSError, http.client.HTTPException) as e:
                raise TaskhostError(0, "unreachable", f"{self.base_url}: {e}") from None

    def _open(self, method: str, path: str, body: Any, timeout: float, accept: str,
              headers: Optional[Dict[str, str]] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + "/api/v1" + path, data=data, method=method)
        request.add_header("Accept", accept)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as e:
            try:
                error = json.load(e)["error"]
                code, message = str(error["code"]), str(error["message"])
            except (ValueError, KeyError, TypeError):
                code, message = "http", f"{e.reason}"
            raise TaskhostError(e.code, code, message) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise TaskhostError(0, "unreachable", f"{self.base_url}: {reason}") from None


class EventStream:
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
        self._client, self._path, self._reconnect = client, path, reconnect
        self.last_event_id = last_event_id
        self._closed = False
        self._heard = False
        # Opened before `events` returns: a task queued after it is told.
        self._answer: Any = self._connect()
        self._events = self._run()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Tuple[str, Any]:
        """`("task", brief)`, a `TaskBrief`, or `("lagged", {"reason": ...})`: typed `Any` so
        that a brief is read as a `TaskBrief` once `kind` says it is one."""
        return next(self._events)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._answer.close()
        try:
            self._events.close()
        except ValueError:
            # Iterated in another thread now: its read fails on the closed answer and it ends.
            pass

    def _connect(self, within: Optional[float] = None) -> Any:
        """Connect, waiting for the answer at most a minute, or `within` seconds (at least 5) when
        that is less: a reconnect gives up at its deadline even when a server takes connections
        and does not answer. The connection's reads keep that time: one made near the deadline
        with less, when quiet for it, breaks and is reconnected (it told its place first)."""
        headers = {} if self.last_event_id is None else {"Last-Event-ID": self.last_event_id}
        # A comment comes every 15 s: a read waiting over a minute means the server is gone.
        timeout = max(self._client.timeout, 60.0)
        if within is not None:
            timeout = min(timeout, max(within, 5.0))
        return self._client._open("GET", self._path, None, timeout, "text/event-stream", headers)

    def _run(self) -> Generator[Tuple[str, Dict[str, Any]], None, None]:
        deadline: Optional[float] = None
        try:
            while True:
                self._heard = False
                broke: Optional[TaskhostError] = None
                try:
                    yield from self._read(self._answer)
                except TaskhostError as e:
                    broke = e
                finally:
                    self._answer.close()
                if self._closed:
                    return
                if self._reconnect <= 0:
                    if broke is not None:
                        raise broke
                    return
                placed = self.last_event_id is not None
                # The time to reconnect runs from the last connection that told anything: one
                # answering and ending at once, again and again, is not reconnected forever.
                if deadline is None or self._heard:
                    deadline = time.monotonic() + self._reconnect
                pause = 0.25 if self._heard else 1.0
                while True:
                    time.sleep(pause)
                    pause = 1.0
                    if self._closed:
                        return
                    try:
                        self._answer = self._connect(deadline - time.monotonic())
                        break
                    except TaskhostError as e:
                        # Only a server away, busy or behind a proxy restarting is waited for.
                        if e.status not in (0, 502, 503, 504) or time.monotonic() >= deadline:
                            raise
                if self._closed:
                    return
                if not placed:
                    yield "lagged", {"reason": "resume"}
        finally:
            self._answer.close()

    def _read(self, answer: Any) -> Iterator[Tuple[str, Dict[str, Any]]]:
        """The events of one connection; one that breaks (the server gone, a minute without even
        a keep-alive) raises `TaskhostError` `unreachable`."""
        name, data, event_id = "message", [], None  # type: str, List[str], Optional[str]
        lines = iter(answer)
        while True:
            try:
                raw = next(lines, None)
            except (OSError, http.client.HTTPException) as e:
                base = self._client.base_url
                raise TaskhostError(0, "unreachable", f"{base}: the event stream broke: {e}") from None
            if raw is None:
                return
            self._heard = True
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                # An id is taken with its event, and alone too (a place sent to a quiet stream);
                # an empty one leaves no place.
                if event_id is not None:
                    self.last_event_id = event_id or None
                if data:
                    yield name, json.loads("\n".join(data))
                name, data, event_id = "message", [], None
            elif line.startswith("event:"):
                name = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].lstrip())
            elif line.startswith("id:") and "\0" not in line:
                # (SSE: one space after the colon is not the value's; an id holding NUL is ignored.)
                event_id = line[len("id:"):].removeprefix(" ")
