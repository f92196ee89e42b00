"""The blocking `Client`'s connections to its server, kept for the next request (HTTP/1.1
keep-alive, over http.client), shared by the threads that use the client: at most `size` idle
ones, each for at most `idle` seconds (`_core.KEPT_IDLE`, `KEPT_FOR`). One the server closed
while it was kept (its socket readable: the end, or bytes no request asked for) is let go, not
used; one the server closes as it is reused, before a byte of the answer (it took no request),
is let go and the request sent once on a new connection."""

from __future__ import annotations

import http.client
import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ._core import KEPT_FOR, KEPT_IDLE

if TYPE_CHECKING:
    import ssl

    from ._core import Server


class Pool:
    """Connections to one server; `opened` counts those made."""

    def __init__(self, server: Server, tls: Optional[ssl.SSLContext], size: int = KEPT_IDLE,
                 idle: float = KEPT_FOR) -> None:
        self.server, self.tls = server, tls
        self.size, self.idle, self.opened = size, idle, 0
        self._kept: List[Tuple[float, http.client.HTTPConnection]] = []
        self._lock = threading.Lock()

    def request(self, method: str, target: str, body: Optional[bytes], headers: Dict[str, str],
                timeout: float) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """`method target` sent and its answer's head read, each within `timeout`: the connection
        and the answer, whose body is to be read, then both handed to `done`."""
        kept = self._take()
        if kept is not None:
            try:
                kept.sock.settimeout(timeout)
                return kept, _send(kept, method, target, body, headers)
            except _Dropped:
                pass
        if self.tls is not None:
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.server.host, self.server.port, timeout=timeout, context=self.tls)
        else:
            connection = http.client.HTTPConnection(self.server.host, self.server.port, timeout=timeout)
        with self._lock:
            self.opened += 1
        try:
            return connection, _send(connection, method, target, body, headers)
        except _Dropped as e:
            raise e.cause from None

    def done(self, connection: http.client.HTTPConnection, answer: http.client.HTTPResponse) -> None:
        """Kept for the next request when its answer was read to the end and the server keeps it."""
        if answer.isclosed() and not answer.will_close and connection.sock is not None:
            with self._lock:
                if len(self._kept) < self.size:
                    self._kept.append((time.monotonic(), connection))
                    return
        connection.close()

    def close(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, []
        for _, connection in kept:
            connection.close()

    def _take(self) -> Optional[http.client.HTTPConnection]:
        while True:
            with self._lock:
                if not self._kept:
                    return None
                since, connection = self._kept.pop()
            sock = connection.sock
            if sock is not None and time.monotonic() - since < self.idle and not _readable(sock):
                return connection
            connection.close()


def _readable(sock: socket.socket) -> bool:
    """Readable now (poll where there is one: select refuses a descriptor past 1023)."""
    if hasattr(select, "poll"):
        poll = select.poll()
        poll.register(sock, select.POLLIN)
        return bool(poll.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class _Dropped(Exception):
    """The connection was closed before a byte of the answer came: `cause`."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _send(connection: http.client.HTTPConnection, method: str, target: str, body: Optional[bytes],
          headers: Dict[str, str]) -> http.client.HTTPResponse:
    try:
        try:
            connection.request(method, target, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise _Dropped(e) from None
        try:
            return connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError) as e:
            raise _Dropped(e) from None
    except BaseException:
        connection.close()
        raise
