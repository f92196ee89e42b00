"""HTTP/1.1 over asyncio's streams, as much as `AsyncClient` needs: a request sent on a connection
kept from an earlier one (`Pool`) or a new one, its answer's head, then its body by its length, in
chunks or to the connection's end, whole or a line at a time. Every wait is bounded; a connection
that breaks, stalls or answers what is not HTTP raises `Broken` with the reason, which the client
names."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any, Awaitable, Dict, List, Optional, Tuple, TypeVar

from ._core import KEPT_FOR, KEPT_IDLE, lasting

if TYPE_CHECKING:
    import ssl

T = TypeVar("T")

#: The most an answer's head (status line and headers) may hold.
HEAD_LIMIT = 64 * 1024
_HEX = frozenset(b"0123456789abcdefABCDEF")


class Broken(Exception):
    """The connection broke, stalled or did not speak HTTP: the reason; `lasting` when no retry
    mends it (`_core.lasting`)."""

    def __init__(self, reason: str, lasting: bool = False) -> None:
        super().__init__(reason)
        self.lasting = lasting


class Dropped(Broken):
    """The connection was closed or reset before a byte of the answer came."""


async def within(step: Awaitable[T], timeout: float) -> T:
    """`step` awaited for at most `timeout` seconds (then `Broken`). On 3.11 and later through
    `asyncio.timeout`: `wait_for` before 3.12 can drop a cancellation that comes as the step ends."""
    try:
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(timeout):  # novermin (3.11 and later only, tested above)
                return await step
        return await asyncio.wait_for(step, timeout)
    except asyncio.TimeoutError:
        raise Broken(f"no answer within {timeout:g} s") from None
    except asyncio.IncompleteReadError as e:
        # (asyncio's own words, "0 bytes read on a total of undefined expected bytes", say less.)
        raise (Broken if e.partial else Dropped)("the server closed the connection") from None
    except (ConnectionResetError, BrokenPipeError) as e:
        raise Dropped(str(e) or type(e).__name__) from None
    except (OSError, ValueError, EOFError, asyncio.LimitOverrunError) as e:
        raise Broken(str(e) or type(e).__name__, lasting(e)) from None


Connection = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Pool:
    """Connections to one server kept for its next requests (HTTP/1.1 keep-alive): at most `size`
    idle ones, each for at most `idle` seconds (`_core.KEPT_IDLE`, `KEPT_FOR`), each used only on
    the event loop that opened it.
    One the server closed meanwhile is let go, not used. `opened` counts the connections made."""

    def __init__(self, size: int = KEPT_IDLE, idle: float = KEPT_FOR) -> None:
        self.size, self.idle, self.opened = size, idle, 0
        self._kept: List[Tuple[float, asyncio.AbstractEventLoop, Connection]] = []

    def take(self) -> Optional[Connection]:
        loop, now = asyncio.get_running_loop(), time.monotonic()
        while self._kept:
            since, owner, (reader, writer) = self._kept.pop()
            if owner is loop and now - since < self.idle and not reader.at_eof() and not writer.is_closing():
                return reader, writer
            _close(writer)
        return None

    def give(self, connection: Connection) -> None:
        if len(self._kept) >= self.size:
            _close(connection[1])
        else:
            self._kept.append((time.monotonic(), asyncio.get_running_loop(), connection))

    def close(self) -> None:
        while self._kept:
            _close(self._kept.pop()[2][1])


def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
    except RuntimeError:  # its event loop has ended: the socket went with it
        pass


async def exchange(host: str, port: int, tls: Optional[ssl.SSLContext], head: str, body: bytes,
                   timeout: float, pool: Optional[Pool] = None) -> Answer:
    """Send `head` (the request line and headers, to the blank line) and `body` and read the
    answer's head, each within `timeout`: on a connection `pool` kept, or a new one. A kept one
    closed or reset before a byte of the answer came (the server let it go as it was reused: it
    took no request) is let go and the request sent once on a new one."""
    kept = pool.take() if pool is not None else None
    if kept is not None:
        try:
            return await _send(Answer(*kept), head, body, timeout)
        except Dropped:
            pass
    reader, writer = await within(asyncio.open_connection(host, port, ssl=tls, limit=HEAD_LIMIT), timeout)
    if pool is not None:
        pool.opened += 1
    return await _send(Answer(reader, writer), head, body, timeout)


async def _send(answer: Answer, head: str, body: bytes, timeout: float) -> Answer:
    try:
        answer._writer.write(head.encode("latin-1") + body)
        await within(answer._writer.drain(), timeout)
        await answer.read_head(timeout)
    except BaseException:
        answer.close()
        raise
    return answer


class Answer:
    """One answer on its own connection: `status`, `reason`, then its body."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self.status, self.reason, self.version = 0, "", ""
        self.headers: Dict[str, str] = {}
        self._length_known = False
        self._left: Optional[int] = None  # bytes of the body (or its chunk) left; None: to the end
        self._chunked = False
        self._chunk_end_due = False  # a chunk's CRLF, read before the next size (a cancel loses nothing)
        self._done = False
        self._buffer = b""

    async def read_head(self, timeout: float) -> None:
        try:
            head = await within(self._reader.readuntil(b"\r\n\r\n"), timeout)
        except Dropped:
            raise Dropped("the server closed the connection without an answer") from None
        status_line, *lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise Broken(f"not an HTTP answer: {status_line[:80]!r}")
        self.status, self.reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        self.version = parts[0]
        for line in lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._chunked, self._left, self._length_known = True, 0, True
        elif self.headers.get("content-length", "").isdigit():
            self._left, self._length_known = int(self.headers["content-length"]), True

    async def read_all(self, timeout: float) -> bytes:
        parts = [self._buffer]
        self._buffer = b""
        while piece := await self._piece(timeout):
            parts.append(piece)
        return b"".join(parts)

    async def readline(self, timeout: float) -> Optional[bytes]:
        """The body's next line with its end, or None at the body's end. A cancelled read loses
        nothing: what was read stays buffered for the next."""
        while b"\n" not in self._buffer:
            piece = await self._piece(timeout)
            if not piece:
                line, self._buffer = self._buffer, b""
                return line or None
            self._buffer += piece
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"

    async def _piece(self, timeout: float) -> bytes:
        """The body's next bytes, b"" at its end."""
        if self._done:
            return b""
        if self._chunked and self._left == 0:
            if self._chunk_end_due:
                if await within(self._reader.readexactly(2), timeout) != b"\r\n":
                    raise Broken("a chunk does not end with CRLF")
                self._chunk_end_due = False
            size_line = await within(self._reader.readuntil(b"\r\n"), timeout)
            size = size_line.split(b";", 1)[0].strip()
            if not size or not _HEX.issuperset(size):
                raise Broken(f"not a chunk's size: {size_line[:20]!r}")
            if int(size, 16) == 0:
                self._done = True
                return b""
            self._left = int(size, 16)
        if self._left == 0:
            self._done = True
            return b""
        piece = await within(self._reader.read(65536 if self._left is None else min(self._left, 65536)), timeout)
        if not piece:
            if self._left is not None:
                raise Broken("the answer ended early")
            self._done = True
            return b""
        if self._left is not None:
            self._left -= len(piece)
            self._chunk_end_due = self._chunked and self._left == 0
        return piece

    async def release(self, pool: Optional[Pool], timeout: float) -> None:
        """Done with: its connection given to `pool` when the whole answer was read and the
        server keeps it open (HTTP/1.1, a length or chunks, no `Connection: close`), else closed."""
        try:
            if (pool is not None and self._done and not self._buffer and self._length_known
                    and self.version == "HTTP/1.1" and "close" not in self.headers.get("connection", "").lower()):
                if self._chunked:
                    # The trailer's lines, to the blank line that ends the answer.
                    while await within(self._reader.readuntil(b"\r\n"), timeout) != b"\r\n":
                        pass
                pool.give((self._reader, self._writer))
                return
        except Broken:
            pass
        except BaseException:
            self.close()
            raise
        self.close()

    def close(self) -> None:
        _close(self._writer)


def request_head(method: str, target: str, headers: Dict[str, Any]) -> str:
    """The request line and headers; a line break in one is refused (`ValueError`), as urllib does."""
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    if any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a request's header holds a line break (a token's or an id's?)")
    return "\r\n".join(lines) + "\r\n\r\n"
