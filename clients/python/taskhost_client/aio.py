"""`AsyncClient`: `Client`'s calls for asyncio applications (FastAPI, aiohttp, ...), awaited, over
asyncio's own streams (standard library only; HTTP/1.1, its connections kept for the next
calls, `https://` with the system's certificates; no proxy is read from the environment, unlike
`Client`'s urllib). The calls' logic is `Client`'s (`taskhost_client._core`): a wait asks again and a
stream reconnects alike.

    client = AsyncClient("http://127.0.0.1:8080", token=None)
    task_id = await client.enqueue("mail", {"to": "a@example.com"}, queue="mail")
    done = await client.wait(task_id, timeout=120)       # many waits at once: no thread each
    async with await client.events(queue="mail") as stream:
        async for kind, data in stream:
            ...
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, AsyncIterator, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _core, _http, _stream
from ._core import Queued, TaskhostError
from .types import Cancelled, Retried, SignalSent, TaskDetail, TaskInput

__all__ = ["AsyncClient", "AsyncEventStream"]

if TYPE_CHECKING:
    import ssl


class AsyncClient:
    """`Client`'s calls, each a coroutine; the same arguments (`ssl_context` too), answers and
    errors."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: Optional[str] = None,
                 timeout: float = 30.0, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.base_url = _core.api_base(base_url)
        self.token = _core.checked_token(token)
        self.timeout = timeout
        self._server = _core.server_of(self.base_url)
        # Made once: loading the system's certificates takes milliseconds. (`ssl` imported only
        # here: a Python without it still has the blocking client, and this one over http://.)
        self._tls: Optional[ssl.SSLContext] = None
        if self._server.tls:
            if ssl_context is None:
                import ssl

                ssl_context = ssl.create_default_context()
            self._tls = ssl_context
        # Calls' connections kept for the next (an event stream's is its own, closed with it).
        self._pool = _http.Pool()

    async def aclose(self) -> None:
        """Close the connections kept for the next calls (a call after opens new ones)."""
        self._pool.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def enqueue(self, handler: str, data: Any = None, **fields: Any) -> int:
        """As `Client.enqueue`."""
        return int(await self._drive(_core.enqueue(handler, data, fields)))

    async def enqueue_unique(self, handler: str, data: Any = None, *, unique_key: str, **fields: Any) -> Queued:
        """As `Client.enqueue_unique`."""
        queued: Queued = await self._drive(_core.enqueue_unique(handler, data, unique_key, fields))
        return queued

    async def enqueue_many(self, tasks: Sequence[TaskInput]) -> List[int]:
        """As `Client.enqueue_many`."""
        return [queued.id for queued in await self.enqueue_many_unique(tasks)]

    async def enqueue_many_unique(self, tasks: Sequence[TaskInput]) -> List[Queued]:
        """As `Client.enqueue_many_unique`."""
        queued: List[Queued] = await self._drive(_core.enqueue_many_unique(tasks))
        return queued

    async def get(self, task_id: int) -> TaskDetail:
        """As `Client.get`."""
        detail: TaskDetail = await self._drive(_core.get(task_id))
        return detail

    async def wait(self, task_id: int, timeout: Optional[float] = 60.0) -> TaskDetail:
        """As `Client.wait`: the server answers at the task's end; a waiting call holds a
        connection and no thread."""
        detail: TaskDetail = await self._drive(_core.wait(task_id, timeout, self.timeout))
        return detail

    async def cancel(self, task_id: int, with_children: bool = False) -> Cancelled:
        """As `Client.cancel`."""
        cancelled: Cancelled = await self._drive(_core.cancel(task_id, with_children))
        return cancelled

    async def signal(self, task_id: int, name: str, data: Any = None) -> SignalSent:
        """As `Client.signal`."""
        sent: SignalSent = await self._drive(_core.signal(task_id, name, data))
        return sent

    async def retry(self, task_id: int) -> Retried:
        """As `Client.retry`."""
        retried: Retried = await self._drive(_core.retry(task_id))
        return retried

    async def events(self, queue: Union[str, Iterable[str], None] = None,
                     handler: Union[str, Iterable[str], None] = None, tasks: Optional[Iterable[int]] = None, *,
                     last_event_id: Optional[str] = None, reconnect: float = 60.0) -> AsyncEventStream:
        """As `Client.events`: the stream, open once this returns; `async for kind, data in it`."""
        stream = AsyncEventStream(self, _stream.events_path(queue, handler, tasks), last_event_id, reconnect)
        opening = _core.Steps(_stream.opening(stream._state))
        while not isinstance(action := opening.next(), _core.Done):
            try:
                opening.did(await stream._step(action))
            except TaskhostError as e:
                opening.failed(e)
        return stream

    async def _drive(self, plan: _core.Plan) -> Any:
        """Run a plan of calls (see `_core`) to its answer."""
        steps = _core.Steps(plan)
        while not isinstance(action := steps.next(), _core.Done):
            try:
                if isinstance(action, _core.Sleep):
                    await asyncio.sleep(action.seconds)
                    steps.did(None)
                elif isinstance(action, _core.Call):
                    steps.did(await self._call(action))
                else:
                    raise TypeError(f"not a call's step: {action!r}")
            except TaskhostError as e:
                steps.failed(e)
        return action.answer

    async def _call(self, call: _core.Call) -> Any:
        timeout = call.timeout or self.timeout
        answer = await self._open(call.method, call.path, call.body, timeout, "application/json", kept=True)
        try:
            body = await answer.read_all(timeout)
        except _http.Broken as e:
            answer.close()
            raise _core.unreachable(self.base_url, e) from None
        except BaseException:
            answer.close()
            raise
        await answer.release(self._pool, timeout)
        return json.loads(body)

    async def _open(self, method: str, path: str, body: Any, timeout: float, accept: str,
                    headers: Optional[Dict[str, str]] = None, kept: bool = False) -> _http.Answer:
        """A request sent and its answer's head read, within `timeout` each, on a connection kept
        from an earlier call or a new one (`kept`: the connection may be kept for the next; else
        it is the answer's alone, closed with it); an answer other than 2xx raised (a redirect
        too: the API answers none)."""
        data = b"" if body is None else json.dumps(body).encode()
        fields = {"Host": self._server.netloc, "Connection": "keep-alive" if kept else "close",
                  "User-Agent": "taskhost-client (asyncio)",
                  **_core.headers_of(self.token, accept, body is not None, headers)}
        if body is not None or method != "GET":
            fields["Content-Length"] = str(len(data))
        head = _http.request_head(method, self._server.target(path), fields)
        try:
            answer = await _http.exchange(self._server.host, self._server.port, self._tls, head, data, timeout,
                                          self._pool if kept else None)
        except _http.Broken as e:
            raise _core.unreachable(self.base_url, e) from None
        if not 200 <= answer.status < 300:
            try:
                said = await answer.read_all(timeout)
            except _http.Broken as e:
                answer.close()
                raise _core.unreachable(self.base_url, e) from None
            except BaseException:
                answer.close()
                raise
            await answer.release(self._pool if kept else None, timeout)
            raise _core.error_of(answer.status, said, answer.reason)
        return answer


class AsyncEventStream(_stream.Stream):
    """An open event stream (`AsyncClient.events`): `async for kind, data in stream`; `aclose()`
    to leave (or `async with`). It reconnects, resumes and tells `("lagged", ...)` as
    `EventStream` does; `last_event_id` likewise."""

    def __init__(self, client: AsyncClient, path: str, last_event_id: Optional[str], reconnect: float) -> None:
        super().__init__(last_event_id, reconnect)
        self._client, self._path = client, path
        self._answer: Optional[_http.Answer] = None
        self._read_timeout = _stream.connect_timeout(client.timeout, None)

    def __aiter__(self) -> AsyncIterator[Tuple[str, Any]]:
        return self

    async def __anext__(self) -> Tuple[str, Any]:
        """`("task", brief)`, a `TaskBrief`, or `("lagged", {"reason": ...})`. A read cancelled
        (`asyncio.wait_for(stream.__anext__(), ...)` running out) loses nothing: the next goes on
        where it was. One reader at a time."""
        while not isinstance(action := self._next(), _core.Done):
            if isinstance(action, _core.Told):
                return _stream.told(action)
            try:
                self._steps.did(await self._step(action))
            except TaskhostError as e:
                self._steps.failed(e)
        self._let_go()
        raise StopAsyncIteration

    def _next(self) -> Union[_core.Action, _core.Done]:
        try:
            return self._steps.next()
        except BaseException:
            # The plan ended by an error (an event that is not JSON, ...): its connection with it.
            self._let_go()
            raise

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._state.closed = True
        self._let_go()
        self._plan.close()

    async def _step(self, action: _core.Action) -> Any:
        if isinstance(action, _core.Read):
            if self._answer is None:
                return None
            try:
                return await self._answer.readline(self._read_timeout)
            except _http.Broken as e:
                if self._state.closed:
                    return None
                raise _core.unreachable(self._client.base_url, f"the event stream broke: {e}") from None
        if isinstance(action, _core.Close):
            self._let_go()
        elif isinstance(action, _core.Sleep):
            await asyncio.sleep(action.seconds)
        elif isinstance(action, _core.Connect):
            await self._open(action.within)
        else:
            raise TypeError(f"not a stream's step: {action!r}")
        return None

    async def _open(self, within: Optional[float]) -> None:
        last = self._state.last_event_id
        headers = {} if last is None else {"Last-Event-ID": last}
        timeout = _stream.connect_timeout(self._client.timeout, within)
        self._answer = await self._client._open("GET", self._path, None, timeout, "text/event-stream", headers)
        # Answered: its reads wait the whole minute again (the server's comment comes every 15 s),
        # whatever was left of a reconnect's time.
        self._read_timeout = _stream.connect_timeout(self._client.timeout, None)

    def _let_go(self) -> None:
        if self._answer is not None:
            self._answer.close()
            self._answer = None
