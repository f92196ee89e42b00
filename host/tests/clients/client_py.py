"""taskhost's Python client (clients/python, installed by path) against a live server with a
worker: its routes and fields checked against the server's OpenAPI document, then each call.
Prints one JSON line of what it saw.

    python3 client_py.py BASE_URL
"""
import asyncio
import http.server
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import typing
import urllib.parse
import urllib.request

from taskhost_client import FINAL_STATES, TASK_FIELDS, AsyncClient, Client, TaskhostError, types

base = sys.argv[1]
client = Client(base)
seen = {}

with urllib.request.urlopen(base + "/api/openapi.json", timeout=30) as r:
    doc = json.load(r)
fields = set(doc["components"]["schemas"]["TaskInput"]["properties"])
assert set(TASK_FIELDS) <= fields, set(TASK_FIELDS) - fields
for path, method in [("/api/v1/tasks", "post"), ("/api/v1/tasks/{id}", "get"),
                     ("/api/v1/tasks/{id}/cancel", "post"), ("/api/v1/tasks/{id}/retry", "post")]:
    assert method in doc["paths"][path], (path, method)
events = {p["name"] for p in doc["paths"]["/api/v1/events"]["get"]["parameters"]}
assert {"queue", "handler", "task"} <= events, events
waits = [p for p in doc["paths"]["/api/v1/tasks/{id}"]["get"]["parameters"] if p["name"] == "wait"]
assert waits and waits[0]["in"] == "query", waits
states = set(doc["components"]["schemas"]["TaskState"]["enum"])
assert FINAL_STATES <= states, FINAL_STATES - states

# The package's types (taskhost_client.types) against the answers' schemas: every field of each
# the server's (deprecated ones aside) and no other, the same ones always there, and each
# Literal the server's list.
schemas = doc["components"]["schemas"]


def schema_of(name):
    schema = schemas[name]
    if "allOf" in schema:  # RunDetail: a Run and more
        parts = [schemas[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in schema["allOf"]]
        return {"properties": {k: v for p in parts for k, v in p.get("properties", {}).items()},
                "required": [r for p in parts for r in p.get("required", [])]}
    return schema


for cls, name in [(types.TaskInput, "TaskInput"), (types.Task, "Task"), (types.Run, "RunDetail"),
                  (types.TaskDetail, "TaskDetail"), (types.TaskBrief, "Brief"), (types.Dependency, "Dependency"),
                  (types.Signal, "Signal"), (types.BackoffSettings, "BackoffSettings"),
                  (types.Cancelled, "CancelledOne"), (types.Retried, "RetriedOne"),
                  (types.SignalSent, "SignalSent")]:
    schema = schema_of(name)
    fields = {k for k, v in schema["properties"].items() if not v.get("deprecated")}
    declared = set(cls.__required_keys__) | set(cls.__optional_keys__)
    assert declared == fields, (cls.__name__, sorted(declared - fields), sorted(fields - declared))
    assert set(cls.__required_keys__) == set(schema.get("required", [])), (cls.__name__, cls.__required_keys__)
for alias, name in [(types.TaskState, "TaskState"), (types.RunStatus, "RunStatus"),
                    (types.UniqueStates, "UniqueStates"), (types.ErrorSource, "ErrorSource")]:
    assert list(typing.get_args(alias)) == schemas[name]["enum"], (name, typing.get_args(alias))

# The key is kept once it succeeded too: the worker may end the first before the second is sent.
one = client.enqueue("echo", {"n": 1}, queued_by="py-client", unique_key="py-once", unique_states="succeeded")
again = client.enqueue("echo", {"n": 2}, unique_key="py-once", unique_states="succeeded")
done = client.wait(one, timeout=60)
seen["one"] = {"same_id": one == again, "state": done["task"]["state"], "results": done["runs"][-1]["results"],
               "queued_by": done["task"]["queued_by"]}
# Queued once: the second call is told a task holds the key, and which.
unique_first = client.enqueue_unique("echo", {"n": 3}, unique_key="py-unique", unique_states="any")
unique_second = client.enqueue_unique("echo", {"n": 4}, unique_key="py-unique", unique_states="any")
seen["unique"] = [unique_first.created, unique_second.created, unique_first.id == unique_second.id,
                  set(schemas["Added"]["properties"]) >= {"id", "created"}]
ids = client.enqueue_many([{"handler": "echo", "data": {"n": n}, "priority": n} for n in range(3)])
seen["many"] = [client.wait(i, timeout=60)["runs"][-1]["results"] for i in ids]
# A batch's unique keys: one held (by the task above), one new.
told = client.enqueue_many_unique([{"handler": "echo", "unique_key": "py-unique", "unique_states": "any"},
                                   {"handler": "echo", "unique_key": "py-many-new"}])
seen["many_unique"] = [[q.created for q in told], told[0].id == unique_first.id]

later = client.enqueue("echo", {"n": 9}, at="2099-01-01T00:00:00Z")
try:
    client.wait(later, timeout=0.3)
    seen["timeout"] = "no error"
except TimeoutError as e:
    seen["timeout"] = e.task["task"]["state"]
seen["cancel"] = client.cancel(later)["cancelled"]
try:
    client.cancel(later)
except TaskhostError as e:
    seen["cancel_again"] = [e.status, e.code]
seen["retry"] = client.retry(later)["attempt"]
seen["after_retry"] = client.wait(later, timeout=60)["task"]["state"]
# A signal (its name escaped in the path) to a task due next year: kept until a run awaits it,
# shown with the task; to a finished task, 409.
kept = client.enqueue("echo", {}, at="2099-01-01T00:00:00Z")
sent = client.signal(kept, "go/ahead now", {"by": "client"})
shown = client.get(kept)["signals"]
try:
    client.signal(later, "go")
except TaskhostError as e:
    seen["signal"] = [sent["woke"], [(s["name"], s["data"]) for s in shown], [e.status, e.code]]

errors = {}
for name, call in [("unknown_handler", lambda: client.enqueue("missing")),
                   ("bad_time", lambda: client.enqueue("echo", at="tomorrow")),
                   ("not_found", lambda: client.get(999999)),
                   ("unreachable", lambda: Client("http://127.0.0.1:1").get(1))]:
    try:
        call()
        errors[name] = "no error"
    except TaskhostError as e:
        errors[name] = [e.status, e.code, e.message]
try:
    client.enqueue("echo", colour="red")
except TypeError as e:
    errors["unknown_field"] = str(e)
try:
    client.enqueue_unique("echo", unique_key=None)  # type: ignore[arg-type]
except TypeError as e:
    errors["unique_key_missing"] = str(e)
seen["errors"] = errors

# Refused before sending: what is not a task id (never read as another task's), a wait of less
# than nothing, an empty list of tasks to follow (named as the argument is); a task without a
# handler goes without one, and the server names the field.
refused = {}
for name, call in [("fraction", lambda: client.get(1.7)),  # type: ignore[arg-type]
                   ("bool", lambda: client.get(True)),
                   ("none", lambda: client.get(None)),  # type: ignore[arg-type]
                   ("negative_wait", lambda: client.wait(one, timeout=-1)),
                   ("empty_tasks", lambda: client.events(tasks=[])),
                   ("token_line_break", lambda: Client(base, token="secret\nX-Other: 1"))]:
    try:
        call()
        refused[name] = "no error"
    except (TypeError, ValueError) as e:
        refused[name] = [type(e).__name__, str(e)]
try:
    client.enqueue_many([{"data": 1}])  # type: ignore[typeddict-item]
    refused["no_handler"] = "no error"
except TaskhostError as e:
    refused["no_handler"] = [e.status, e.message]
seen["refused"] = refused

# Events: a stream of one task is told its state at once; one of a queue, opened before a task
# is queued in it, is told that task until it ends.
# A lost end must fail the test, not hang it: the rest has two minutes from here.
signal.alarm(120)
asked = client.events(tasks=[one])
kind, data = next(asked)
seen["events_asked"] = [kind, data["id"] == one, data["state"]]
asked.close()
stream = client.events(queue="py-events")
watched = client.enqueue("echo", {"n": 5}, queue="py-events")
states = []
for kind, data in stream:
    if kind == "lagged":
        # Events were lost: read the task instead.
        data = client.get(watched)["task"]
    elif kind != "task":
        continue
    states.append(data["state"] if data["id"] == watched else f"another task: {data['id']}")
    if data["state"] in FINAL_STATES:
        break
stream.close()
seen["events_queue"] = states


class Proxy:
    """A TCP proxy to the server whose connections the script cuts, holding new ones until it
    lets them through; it keeps what the client sent. `head_only`: the next connection is given
    the server's answer up to its body, then cut."""

    def __init__(self, target):
        self.target, self.sent, self.pairs = target, [], []
        self.head_only = False
        self.busy = False  # new connections answered 503 `busy` by the proxy itself (True: all; n: the next n)
        self.through = threading.Event()
        self.through.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            near, _ = self.server.accept()
            self.through.wait()
            if self.busy:
                # Counted before it is answered: the script reads the count once answered.
                if self.busy is not True:
                    self.busy -= 1
                # The request read first: a socket closed with bytes unread is reset, its answer lost.
                got = b""
                while b"\r\n\r\n" not in got and (chunk := near.recv(65536)):
                    got += chunk
                body = b'{"error": {"code": "busy", "message": "every connection for waits is held"}}'
                head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
                near.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                near.close()
                continue
            far = socket.create_connection(self.target)
            self.pairs.append((near, far))
            head_only, self.head_only = self.head_only, False
            threading.Thread(target=self._pipe, args=(near, far, True, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(far, near, False, head_only), daemon=True).start()

    def _pipe(self, src, dst, keep, head_only):
        got = b""
        try:
            while chunk := src.recv(65536):
                if keep:
                    self.sent.append(chunk)
                if head_only:
                    got += chunk
                    if b"\r\n\r\n" in got:
                        dst.sendall(got[:got.index(b"\r\n\r\n") + 4])
                        break
                    continue
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.through.clear()
        for pair in self.pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.pairs.clear()


# A stream whose connection breaks reconnects with its last id and is told first what it missed:
# the task queued while it was away (seen by another stream meanwhile, so the server's look told
# it before the reconnect). Tasks scheduled for later: each is told once.
parts = urllib.parse.urlsplit(base)
proxy = Proxy((parts.hostname, parts.port))
direct = client.events(queue="py-resume")
resumed = Client(proxy.url).events(queue="py-resume")
first = client.enqueue("echo", {}, queue="py-resume", at="2099-01-01T00:00:00Z")
_, told = next(resumed)
place = resumed.last_event_id
proxy.cut()
second = client.enqueue("echo", {}, queue="py-resume", at="2099-01-01T00:00:00Z")
for kind, data in direct:
    if kind == "task" and data["id"] == second:
        break
direct.close()
proxy.through.set()
kind, again = next(resumed)
sent = b"".join(proxy.sent).decode("latin-1").lower()
resumed.close()
seen["events_resumed"] = [told["id"] == first, place is not None, f"last-event-id: {place}".lower() in sent,
                          kind, again.get("id") == second]

# A stream that broke before it was told any place reconnects without one and says itself that
# it may have missed events.
proxy.head_only = True
unplaced = Client(proxy.url).events(queue="py-resume")
kind, data = next(unplaced)
seen["events_lagged_unplaced"] = [kind, data, unplaced.last_event_id is not None]
unplaced.close()

# A stream that is not to reconnect ends, or raises, when its connection is cut.
plain = Client(proxy.url).events(queue="py-resume", reconnect=0)
proxy.cut()
try:
    next(plain)
    seen["events_not_reconnected"] = "no error"
except TaskhostError as e:
    seen["events_not_reconnected"] = [e.status, e.code]
except StopIteration:
    seen["events_not_reconnected"] = "ended"
plain.close()

# A stream whose reconnects are taken and never answered (the proxy holds them) gives up at its
# deadline, not after a minute's wait for each answer.
proxy.through.set()
hung = Client(proxy.url).events(queue="py-resume", reconnect=6)
proxy.cut()
started = time.monotonic()
try:
    for _ in hung:
        pass
    seen["events_given_up"] = "ended"
except TaskhostError as e:
    seen["events_given_up"] = [e.status, e.code, round(time.monotonic() - started)]
hung.close()

# A stream whose reconnects are answered 503 `busy` until its deadline gives up as unreachable too.
proxy.through.set()
crowded = Client(proxy.url).events(queue="py-resume", reconnect=3)
proxy.busy = True
proxy.cut()
proxy.through.set()
try:
    for _ in crowded:
        pass
    seen["events_given_up_busy"] = "ended"
except TaskhostError as e:
    seen["events_given_up_busy"] = [e.status, e.code, "busy" in e.message]
crowded.close()
proxy.busy = False

# Opening a stream on a server holding all the streams it may (503 `busy`) is asked again while
# `reconnect` lasts: two busy answers, then open and told a task queued next; with `reconnect=0`
# the busy answer is raised at once.
proxy.busy = 2
opened = Client(proxy.url).events(queue="py-open", reconnect=30)
waited = client.enqueue("echo", {}, queue="py-open", at="2099-01-01T00:00:00Z")
kind, data = next(opened)
seen["events_opened_busy"] = [proxy.busy, kind, data["id"] == waited]
opened.close()
proxy.busy = 1
try:
    Client(proxy.url).events(queue="py-open", reconnect=0).close()
    seen["events_open_busy_at_once"] = "opened"
except TaskhostError as e:
    seen["events_open_busy_at_once"] = [e.status, e.code, proxy.busy]
proxy.busy = False

# A server holding all the waits it may answers a wait 503 `busy`, and a plain read as ever: `wait`
# reads the task then, and asks again while its time lasts (two busy answers, then the end); it
# returns a task the read found final; past its time it raises `TimeoutError` with the task read.


class Busy(http.server.BaseHTTPRequestHandler):
    busy_left = 2  # -1: busy for ever
    plain_state = "scheduled"
    waits = 0

    def do_GET(self):
        if "wait=" in self.path:
            Busy.waits += 1
            if Busy.busy_left != 0:
                Busy.busy_left -= 1 if Busy.busy_left > 0 else 0
                status, body = 503, {"error": {"code": "busy", "message": "too many requests wait"}}
            else:
                status, body = 200, {"task": {"id": 7, "state": "succeeded"}, "runs": []}
        else:
            status, body = 200, {"task": {"id": 7, "state": Busy.plain_state}, "runs": []}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


busy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Busy)
threading.Thread(target=busy.serve_forever, daemon=True).start()
busy_client = Client(f"http://127.0.0.1:{busy.server_address[1]}")
seen["wait_busy"] = [busy_client.wait(7, timeout=30)["task"]["state"], Busy.waits]
Busy.busy_left, Busy.waits = -1, 0
try:
    busy_client.wait(7, timeout=1)
    seen["wait_busy_past_deadline"] = "answered"
except TimeoutError as e:
    seen["wait_busy_past_deadline"] = ["timeout", e.task["task"]["state"], Busy.waits > 1]  # type: ignore[attr-defined]
Busy.plain_state, Busy.waits = "succeeded", 0
seen["wait_busy_read_final"] = [busy_client.wait(7, timeout=30)["task"]["state"], Busy.waits]


# The asyncio client: the same calls awaited, many waits at once on one thread, its errors, a
# stream told a task to its end, one cut and resumed, and a busy server's waits asked again.
async def asynchronously():
    aclient = AsyncClient(base)
    told = {}
    first = await aclient.enqueue("echo", {"n": 10}, queued_by="py-async")
    many = await aclient.enqueue_many([{"handler": "echo", "data": {"n": n}} for n in range(11, 31)])
    done = await asyncio.gather(*(aclient.wait(i, timeout=60) for i in [first] + many))
    told["waits"] = [[d["task"]["state"] for d in done].count("succeeded"), done[0]["runs"][-1]["results"],
                     done[0]["task"]["queued_by"],
                     not any(t.name.startswith("asyncio") for t in threading.enumerate())]
    # (Held in any state: by default a key is let go at its task's end, which a worker may reach
    # between the two calls.)
    told["unique"] = [[q.created for q in await aclient.enqueue_many_unique(
        [{"handler": "echo", "unique_key": "py-async-u", "unique_states": "any"},
         {"handler": "echo", "unique_key": "py-async-u", "unique_states": "any"}])],
        (await aclient.enqueue_unique("echo", unique_key="py-async-u", unique_states="any")).created]
    later = await aclient.enqueue("echo", {}, at="2099-01-01T00:00:00Z")
    try:
        await aclient.wait(later, timeout=0.3)
        told["timeout"] = "no error"
    except TimeoutError as e:
        told["timeout"] = e.task["task"]["state"]  # type: ignore[attr-defined]
    told["cancel"] = (await aclient.cancel(later))["cancelled"]
    told["retry"] = (await aclient.retry(later))["attempt"]
    kept = await aclient.enqueue("echo", {}, at="2099-01-01T00:00:00Z")
    told["signal"] = [(await aclient.signal(kept, "go"))["woke"], (await aclient.get(kept))["signals"][0]["data"]]
    told["got"] = (await aclient.get(later))["task"]["id"] == later
    errors = {}
    for name, call in [("unknown_handler", lambda: aclient.enqueue("missing")),
                       ("not_found", lambda: aclient.get(999999)),
                       ("unreachable", lambda: AsyncClient("http://127.0.0.1:1").get(1))]:
        try:
            await call()
            errors[name] = "no error"
        except TaskhostError as e:
            errors[name] = [e.status, e.code]
    told["errors"] = errors
    async with await aclient.events(queue="py-async-events") as stream:
        watched = await aclient.enqueue("echo", {}, queue="py-async-events")
        states = []
        async for kind, data in stream:
            if kind == "task" and data["id"] == watched:
                states.append(data["state"])
                if data["state"] in FINAL_STATES:
                    break
    told["events"] = states
    # The server keeps a connection for the next call: five calls, one connection opened (and
    # the blocking client's too).
    kept, kept_blocking = AsyncClient(base), Client(base)
    for _ in range(5):
        await kept.get(first)
        kept_blocking.get(first)
    told["kept"] = [kept._pool.opened, kept_blocking._pool.opened]
    await kept.aclose()
    kept_blocking.close()
    # A read that a caller's timeout cancels loses nothing: the next goes on on the same connection.
    proxy.through.set()
    patient = await AsyncClient(proxy.url).events(queue="py-async-patient")
    connections = len(proxy.pairs)
    try:
        await asyncio.wait_for(patient.__anext__(), 0.3)
        told["cancelled_read"] = "an event"
    except asyncio.TimeoutError:
        awaited = await aclient.enqueue("echo", {}, queue="py-async-patient", at="2099-01-01T00:00:00Z")
        kind, data = await patient.__anext__()
        told["cancelled_read"] = [kind, data["id"] == awaited, len(proxy.pairs) == connections]
    await patient.aclose()
    # Cut while open: reconnected with its place, told first the task queued while away.
    resumed = await AsyncClient(proxy.url).events(queue="py-async-resume")
    one = await aclient.enqueue("echo", {}, queue="py-async-resume", at="2099-01-01T00:00:00Z")
    _, data = await resumed.__anext__()
    place = resumed.last_event_id
    proxy.sent.clear()
    proxy.cut()
    two = await aclient.enqueue("echo", {}, queue="py-async-resume", at="2099-01-01T00:00:00Z")
    async with await aclient.events(tasks=[two]) as direct:
        await direct.__anext__()  # the server's look has told it: a resumed stream is told it too
    proxy.through.set()
    kind, again = await resumed.__anext__()
    sent = b"".join(proxy.sent).decode("latin-1").lower()
    await resumed.aclose()
    told["resumed"] = [data["id"] == one, f"last-event-id: {place}".lower() in sent, kind, again.get("id") == two]
    # Broken before it had a place: it says itself that it may have missed events.
    proxy.head_only = True
    unplaced = await AsyncClient(proxy.url).events(queue="py-async-resume")
    told["lagged_unplaced"] = list(await unplaced.__anext__())
    await unplaced.aclose()
    # Reconnects taken and never answered: given up at its deadline.
    hung = await AsyncClient(proxy.url).events(queue="py-async-resume", reconnect=6)
    proxy.cut()
    started = time.monotonic()
    try:
        async for _ in hung:
            pass
        told["given_up"] = "ended"
    except TaskhostError as e:
        told["given_up"] = [e.status, e.code, round(time.monotonic() - started)]
    await hung.aclose()
    Busy.busy_left, Busy.plain_state, Busy.waits = 2, "scheduled", 0
    busy_async = AsyncClient(f"http://127.0.0.1:{busy.server_address[1]}")
    told["wait_busy"] = [(await busy_async.wait(7, timeout=30))["task"]["state"], Busy.waits]
    return told


async def answers_read_piecewise():
    """AsyncClient's own HTTP reading against a stand-in server that writes its answers in pieces:
    chunks with extensions and trailers, a length, a body to the connection's end, an event stream
    whose lines are split across chunks; a redirect and a broken chunk refused."""
    body = json.dumps({"task": {"id": 1, "state": "succeeded"}, "runs": [{"results": {"ü": "x" * 3000}}]}).encode()
    events = (b"id: 7\r\nevent: task\r\ndata: {\"id\": 1,\r\n"
              b"data:  \"state\": \"running\"}\r\n\r\n: comment\n\nevent: task\ndata: {\"id\": 1, \"state\": \"dead\"}\n\n")

    async def pieces(writer, data, size):
        # No write buffer: each drain waits for its piece to leave, so the pieces go apart.
        writer.transport.set_write_buffer_limits(0)
        for i in range(0, len(data), size):
            writer.write(data[i:i + size])
            await writer.drain()

    async def serve(reader, writer):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = head.split(" ")[1]
        ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if path.endswith("/tasks/1"):
            chunks = b"".join(b"%x;piece=%d\r\n%s\r\n" % (len(body[i:i + 100]), i, body[i:i + 100])
                              for i in range(0, len(body), 100))
            await pieces(writer, ok + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\nX-Trailer: t\r\n\r\n", 7)
        elif path.endswith("/tasks/2"):
            await pieces(writer, ok + b"Content-Length: %d\r\n\r\n" % len(body) + body, 333)
        elif path.endswith("/tasks/3"):
            await pieces(writer, ok + b"\r\n" + body, 1000)
        elif path.endswith("/tasks/4"):
            writer.write(b"HTTP/1.1 302 Found\r\nLocation: https://elsewhere/\r\nContent-Length: 0\r\n\r\n")
        elif path.endswith("/tasks/5"):
            writer.write(ok + b"Transfer-Encoding: chunked\r\n\r\n-1\r\n")
        elif "queue=quiet" in path:
            # Told a place, then ended: the stream reconnects late in its time; the new connection
            # stays quiet longer than was left of it (as between the server's comments), then tells.
            quiet_connections.append(path)
            event = b"id: q%d\nevent: task\ndata: {\"id\": %d, \"state\": \"running\"}\n\n" % ((len(quiet_connections),) * 2)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            if len(quiet_connections) % 2 == 0:
                # Quiet for 7 s, or until the client gives up on the connection (which it must not).
                try:
                    await asyncio.wait_for(reader.read(1), 7)
                except asyncio.TimeoutError:
                    pass
            writer.write(event)
        elif "queue=notjson" in path:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: task\ndata: {nope\n\n")
            await writer.drain()
            # The client's end of the connection: it must close it after the bad event.
            gone = loop.create_future()
            not_json_closed.append(gone)
            gone.set_result(await asyncio.wait_for(reader.read(1), 30) == b"")
        elif "queue=silent" in path:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            await writer.drain()
            await silent_release.wait()
        elif "/tasks/8?wait=" in path:
            # A serve restarting: its wait answered as it stops, a connection cut, 503, then the end.
            restart_asks.append(path)
            step = len(restart_asks) % 4
            state = {1: b"running", 0: b"succeeded"}.get(step)
            if state is not None:
                task = b'{"task": {"id": 8, "state": "%s"}, "runs": []}' % state
                writer.write(ok + b"Content-Length: %d\r\n\r\n" % len(task) + task)
            elif step == 3:
                down = b'{"error": {"code": "unavailable", "message": "the database is down"}}'
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(down) + down)
        elif "/tasks/9?wait=" in path:
            try:  # taken and never answered (a server stopped with SIGSTOP)
                await asyncio.wait_for(reader.read(1), 30)
            except asyncio.TimeoutError:
                pass
        elif path.endswith("/tasks/6"):
            writer.write(ok + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XY0\r\n\r\n")
        elif path.endswith("/tasks/7"):
            pass  # closed without a byte of an answer
        elif "/events" in path:
            chunked = b"".join(b"%x\r\n%s\r\n" % (len(events[i:i + 5]), events[i:i + 5]) for i in range(0, len(events), 5))
            await pieces(writer, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + chunked + b"0\r\n\r\n", 3)
        await writer.drain()
        writer.close()

    quiet_connections, not_json_closed, silent_release, restart_asks = [], [], asyncio.Event(), []
    loop = asyncio.get_running_loop()

    async def in_thread(call):
        """`call()` in a thread of its own, awaited (this directory's queue.py hides the module
        asyncio's executor imports)."""
        answer = loop.create_future()

        def run():
            try:
                value = call()
                loop.call_soon_threadsafe(answer.set_result, value)
            except BaseException as e:
                loop.call_soon_threadsafe(answer.set_exception, e)

        threading.Thread(target=run, daemon=True).start()
        return await asyncio.wait_for(answer, 60)
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    stand_in_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    stand_in = AsyncClient(stand_in_url)
    read = []
    for task_id in (1, 2, 3):
        read.append((await stand_in.get(task_id))["runs"][0]["results"]["ü"] == "x" * 3000)
    refused = []
    for task_id in (4, 5, 6):
        try:
            await stand_in.get(task_id)
            refused.append("read")
        except TaskhostError as e:
            refused.append([e.status, e.code])
    try:
        await stand_in.get(7)
        dropped = "read"
    except TaskhostError as e:
        dropped = [e.status, e.code, e.message.endswith("the server closed the connection without an answer")]

    # A wait across a restart of serve is asked again while its time lasts, by both clients; one
    # taken and never answered is given up on soon after its deadline, not a request timeout later.
    across_restart = [(await stand_in.wait(8, timeout=30))["task"]["state"]]
    across_restart.append(await in_thread(lambda: Client(stand_in_url).wait(8, timeout=30)["task"]["state"]))
    across_restart.append(len(restart_asks))
    started = time.monotonic()
    try:
        await stand_in.wait(9, timeout=1)
        frozen = "answered"
    except TaskhostError as e:
        frozen = [e.code, time.monotonic() - started < 20]

    def frozen_blocking():
        started = time.monotonic()
        try:
            Client(stand_in_url).wait(9, timeout=1)
            return ["answered", False]
        except TaskhostError as e:
            return [e.code, time.monotonic() - started < 20]

    frozen += await in_thread(frozen_blocking)

    def dropped_by_blocking_client():
        try:
            Client(stand_in_url).get(7)
            return "read"
        except TaskhostError as e:
            return [e.status, e.code, e.message.endswith("the server closed the connection without an answer")]

    dropped_blocking = await in_thread(dropped_by_blocking_client)
    stream = await stand_in.events(reconnect=0)
    told = [(kind, data["state"]) async for kind, data in stream]
    # A reconnect late in its time reads its answer as long as any (a minute), not what was left.
    quiet = await stand_in.events(queue="quiet", reconnect=6)
    late = [(await quiet.__anext__())[1]["id"], (await quiet.__anext__())[1]["id"]]
    await quiet.aclose()

    late_blocking = []

    def blocking():
        with Client(stand_in_url).events(queue="quiet", reconnect=6) as stream:
            late_blocking.extend([next(stream)[1]["id"], next(stream)[1]["id"]])

    # (A thread of its own: this directory's queue.py hides the module asyncio's executor imports.)
    await in_thread(blocking)

    # An event that is not JSON raises, and its connection is let go (the server sees it closed).
    bad = await stand_in.events(queue="notjson", reconnect=0)
    try:
        await bad.__anext__()
    except ValueError:
        pass

    def not_json_blocking():
        stream = Client(stand_in_url).events(queue="notjson", reconnect=0)
        try:
            next(stream)
        except ValueError:
            pass
        return stream  # held until the server has seen the connection closed

    held = await in_thread(not_json_blocking)
    closed = await asyncio.wait_for(asyncio.gather(*not_json_closed), 30)
    del held

    # A blocking stream closed from another thread while a read waits on a quiet server: the read
    # ends at once (the socket is shut), not at the server's next byte.
    def closed_from_another_thread():
        stream = Client(stand_in_url).events(queue="silent")
        ended = threading.Event()
        reading = threading.Thread(target=lambda: (list(stream), ended.set()), daemon=True)
        reading.start()
        stream.close()
        return ended.wait(5)
    closed_while_reading = await in_thread(closed_from_another_thread)
    silent_release.set()
    try:
        await AsyncClient(stand_in_url, token="a\r\nb").get(1)
        line_break = "sent"
    except ValueError:
        line_break = "refused"
    server.close()
    return {"read": read, "refused": refused, "dropped": dropped, "dropped_blocking": dropped_blocking, "across_restart": across_restart, "frozen": frozen, "events": told, "last_event_id": stream.last_event_id,
            "late_reconnect": [late, late_blocking, len(quiet_connections)], "not_json_closed": closed,
            "closed_while_reading": closed_while_reading, "line_break": line_break}


class Kept(http.server.BaseHTTPRequestHandler):
    """A stand-in server that keeps connections (HTTP/1.1), counting them and the requests;
    `drop`: the next request is read and its connection closed unanswered; `/tasks/2` is answered
    with `Connection: close`."""
    protocol_version = "HTTP/1.1"
    connections, requests, drop, last_path = 0, 0, False, ""
    together = threading.Barrier(20)

    def setup(self):
        super().setup()
        Kept.connections += 1

    def do_GET(self):
        Kept.requests, Kept.last_path = Kept.requests + 1, self.path
        if self.path.endswith("/tasks/3"):
            Kept.together.wait(30)  # twenty at once: twenty connections
        if Kept.drop:
            Kept.drop, self.close_connection = False, True
            return
        body = json.dumps({"task": {"id": 1, "state": "succeeded"}, "runs": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.path.endswith("/tasks/2"):
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


def connections_kept():
    """AsyncClient's calls one after another go on one connection; one the server closes as it is
    reused is replaced (the request sent again), one answered `Connection: close` or kept too long
    is not used again; of many at once at most 8 are kept; a second event loop opens its own."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Kept)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kept = AsyncClient(f"http://127.0.0.1:{server.server_address[1]}")
    Kept.connections = Kept.requests = 0

    async def first_loop():
        for _ in range(5):
            await kept.get(1)
        found = [[Kept.connections, Kept.requests]]
        Kept.drop = True
        found.append([(await kept.get(1))["task"]["id"], Kept.connections, Kept.requests])
        await kept.get(2)
        await kept.get(1)
        found.append(Kept.connections)
        await asyncio.gather(*(kept.get(1) for _ in range(20)))
        found.append(len(kept._pool._kept))
        kept._pool.idle, before = 0.0, Kept.connections
        await kept.get(1)
        found.append(Kept.connections - before)
        kept._pool.idle = 4.0
        return found

    found = asyncio.run(first_loop())
    before = Kept.connections
    found.append([asyncio.run(kept.get(1))["task"]["id"], Kept.connections - before])
    server.shutdown()
    return found


def connections_kept_blocking():
    """The blocking Client likewise, its threads sharing the kept connections; with a proxy
    named in the environment, its calls go through it (urllib), as before."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Kept)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    Kept.connections = Kept.requests = 0
    kept = Client(url)
    for _ in range(5):
        kept.get(1)
    found = [[Kept.connections, Kept.requests]]
    Kept.drop = True
    found.append([kept.get(1)["task"]["id"], Kept.connections, Kept.requests])
    kept.get(2)
    kept.get(1)
    found.append(Kept.connections)
    threads = [threading.Thread(target=kept.get, args=(3,)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    found.append(len(kept._pool._kept))
    kept._pool.idle, before = 0.0, Kept.connections
    kept.get(1)
    found.append(Kept.connections - before)
    os.environ["http_proxy"] = url
    try:
        proxied = Client("http://taskhost.invalid:9")
        found.append([proxied._pool is None, proxied.get(1)["task"]["id"], Kept.last_path])
    finally:
        del os.environ["http_proxy"]
    kept.close()
    server.shutdown()
    return found


def over_tls():
    """Both clients over https:// with the application's own `ssl_context` (trusting a self-signed
    certificate made here): calls answered, on one kept connection each; without it, the server's
    certificate is not trusted and the call is `unreachable`, saying so."""
    work = tempfile.mkdtemp()
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Kept)
    server.socket = serving.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    trusting = ssl.create_default_context(cafile=cert)
    Kept.connections = Kept.requests = 0
    blocking = Client(url, ssl_context=trusting)
    found = [[blocking.get(1)["task"]["id"] for _ in range(3)], Kept.connections]
    blocking.close()

    async def awaited():
        client = AsyncClient(url, ssl_context=trusting)
        ids = [(await client.get(1))["task"]["id"] for _ in range(3)]
        await client.aclose()
        return [ids, client._pool.opened]

    found.append(asyncio.run(awaited()))
    for call in (lambda: Client(url).get(1), lambda: asyncio.run(AsyncClient(url).get(1))):
        try:
            call()
            found.append("answered")
        except TaskhostError as e:
            found.append([e.status, e.code, "certificate verify failed" in e.message])
    # A wait is not asked again for a reason no retry mends: a certificate not trusted, or TLS
    # spoken to a plain server. Raised at once, not when the 30 s end (they were).
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Kept)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    for to in (url, f"https://127.0.0.1:{plain.server_address[1]}"):
        for call in (lambda: Client(to).wait(1, timeout=30), lambda: asyncio.run(AsyncClient(to).wait(1, timeout=30))):
            began = time.monotonic()
            try:
                call()
                found.append("answered")
            except TaskhostError as e:
                found.append([e.status, e.code, time.monotonic() - began < 10])
    plain.shutdown()
    server.shutdown()
    return found


seen["tls"] = over_tls()
seen["async_kept"] = connections_kept()
seen["kept"] = connections_kept_blocking()
seen["async_http"] = asyncio.run(answers_read_piecewise())
seen["async"] = asyncio.run(asynchronously())
busy.shutdown()
print(json.dumps(seen))
