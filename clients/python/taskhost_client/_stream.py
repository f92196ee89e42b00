"""An event stream's plans, which both clients drive (see `_core`): its path, its first
connection (`opening`), then its events, reconnecting with its place (`stream`)."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any, Iterable, List, Optional, Tuple, Union

from ._core import Close, Connect, Plan, Read, Sleep, Steps, TaskhostError, Told, passing, task_id_of

def events_path(queue: Union[str, Iterable[str], None], handler: Union[str, Iterable[str], None],
                tasks: Optional[Iterable[int]]) -> str:
    params = {}
    for arg, name, value in (("queue", "queue", queue), ("handler", "handler", handler), ("tasks", "task", tasks)):
        if value is not None:
            values: List[Any] = [value] if isinstance(value, (str, int)) else list(value)
            if not values:
                # An empty list would be no filter at all, the server's every task.
                raise ValueError(f"events({arg}=[]): an empty list follows nothing; pass None for all")
            if name == "task":
                values = [task_id_of(v) for v in values]
            params[name] = ",".join(str(v) for v in values)
    return "/events" + ("?" + urllib.parse.urlencode(params) if params else "")


def connect_timeout(request_timeout: float, within: Optional[float]) -> float:
    """A stream's connection waits for its answer, and for each read, at most a minute, or
    `within` seconds (at least 5) when that is less: a reconnect gives up at its deadline even
    when a server takes connections and does not answer. (A comment comes every 15 s: a read
    waiting over a minute means the server is gone.)"""
    timeout = max(request_timeout, 60.0)
    return timeout if within is None else min(timeout, max(within, 5.0))


class StreamState:
    """What an event stream's plan and its reader share."""

    def __init__(self, last_event_id: Optional[str], reconnect: float) -> None:
        self.last_event_id = last_event_id
        self.reconnect = reconnect
        self.closed = False


class Stream:
    """What both clients' event streams hold: the plan (`stream`) and its state."""

    def __init__(self, last_event_id: Optional[str], reconnect: float) -> None:
        self._state = StreamState(last_event_id, reconnect)
        self._plan = stream(self._state)
        self._steps = Steps(self._plan)

    @property
    def last_event_id(self) -> Optional[str]:
        """The id of the last look the stream was told (None before the first)."""
        return self._state.last_event_id

    @last_event_id.setter
    def last_event_id(self, value: Optional[str]) -> None:
        self._state.last_event_id = value


def opening(state: StreamState) -> Plan:
    """An event stream's first connection. A server holding as many waits and streams as it may
    (503 `busy`) is asked again while `state.reconnect` lasts (a quarter second, then each
    second), and its last answer raised when that ends; any other failure raises at once."""
    deadline = time.monotonic() + state.reconnect
    pause = 0.25
    while True:
        try:
            yield Connect(None)
            return
        except TaskhostError as e:
            left = deadline - time.monotonic()
            if e.code != "busy" or state.closed or left <= 0:
                raise
        # (The last try at the deadline itself.)
        yield Sleep(min(pause, left))
        pause = 1.0


def stream(state: StreamState) -> Plan:
    """An event stream, its first connection open: each connection's events, then, when it
    breaks or the server ends it, a reconnect with the last id (`Last-Event-ID`, sent by the
    client's `Connect`), for `state.reconnect` seconds from the last connection that told
    anything (one answering and ending at once, again and again, is not reconnected forever)."""
    deadline: Optional[float] = None
    while True:
        heard = False
        broke: Optional[TaskhostError] = None
        name, data, event_id = "message", [], None  # type: str, List[str], Optional[str]
        try:
            while True:
                raw = yield Read()
                if raw is None:
                    break
                heard = True
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line:
                    # An id is taken with its event, and alone too (a place sent to a quiet
                    # stream); an empty one leaves no place.
                    if event_id is not None:
                        state.last_event_id = event_id or None
                    if data:
                        yield Told(name, json.loads("\n".join(data)))
                    name, data, event_id = "message", [], None
                elif line.startswith("event:"):
                    name = line[len("event:"):].strip()
                elif line.startswith("data:"):
                    data.append(line[len("data:"):].lstrip())
                elif line.startswith("id:") and "\0" not in line:
                    # (SSE: one space after the colon is not the value's; an id holding NUL is ignored.)
                    value = line[len("id:"):]
                    event_id = value[1:] if value.startswith(" ") else value
        except TaskhostError as e:
            broke = e
        yield Close()
        if state.closed:
            return
        if state.reconnect <= 0:
            if broke is not None:
                raise broke
            return
        placed = state.last_event_id is not None
        if deadline is None or heard:
            deadline = time.monotonic() + state.reconnect
        pause = 0.25 if heard else 1.0
        while True:
            yield Sleep(pause)
            pause = 1.0
            if state.closed:
                return
            try:
                yield Connect(deadline - time.monotonic())
                break
            except TaskhostError as e:
                # Only a server away, busy or behind a proxy restarting is waited for; given up
                # on, it is unreachable, whatever its last answer was.
                if not passing(e):
                    raise
                if time.monotonic() >= deadline:
                    if e.status == 0:
                        raise
                    gave_up = f"gave up reconnecting after {state.reconnect:g} s: {e.status} {e.code}: {e.message}"
                    raise TaskhostError(0, "unreachable", gave_up) from e
        if state.closed:
            return
        if not placed:
            yield Told("lagged", {"reason": "resume"})


def told(event: Told) -> Tuple[str, Any]:
    return event.kind, event.data
