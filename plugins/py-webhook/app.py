"""Calls a webhook from Python: POSTs the task's `payload` as JSON to its `url` over wasi:http and
returns the status and the start of the response. A 5xx answer is a retryable failure, a 4xx one is
not. The URL must be granted to this handler in the operator's configuration
([handlers.py-webhook.grants.http]).

Built against wit/'s task-handler-http world (task-handler plus wasi:http's outgoing-handler). With
wasi:http's own `types` interface beside taskhost's, componentize-py names both by package:
`taskhost_plugin_types` and `wasi_http_types`. The request is made with the raw bindings, each
wait a blocking `pollable.block()`: a handler runs one task, it needs no event loop.
"""
import json
from urllib.parse import urlsplit

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler
from wit_world.imports import wasi_http_types as http
from wit_world.imports.streams import StreamError_Closed
from wit_world.imports.taskhost_plugin_types import HandlerError


def error(code, message, retryable):
    return Err(HandlerError(code=code, message=message, retryable=retryable))


def post(url, body):
    """POST `body` (bytes) to `url`; the status and the response's bytes."""
    parts = urlsplit(url)
    headers = http.Fields.from_list([
        ("content-type", b"application/json"),
        ("content-length", str(len(body)).encode()),
    ])
    request = http.OutgoingRequest(headers)
    request.set_method(http.Method_Post())
    request.set_scheme(http.Scheme_Https() if parts.scheme == "https" else http.Scheme_Http())
    request.set_authority(parts.netloc)
    request.set_path_with_query(parts.path + (f"?{parts.query}" if parts.query else "") or "/")
    outgoing = request.body()
    response_future = outgoing_handler.handle(request, None)
    with outgoing.write() as stream:
        for start in range(0, len(body), 4096):
            stream.blocking_write_and_flush(body[start:start + 4096])
    http.OutgoingBody.finish(outgoing, None)
    with response_future.subscribe() as ready:
        ready.block()
    answer = response_future.get()
    if not isinstance(answer, Ok) or not isinstance(answer.value, Ok):
        reason = answer.value.value if isinstance(answer, Ok) else "no response"
        raise RuntimeError(f"POST {url}: {reason}")
    response = answer.value.value
    data = bytearray()
    incoming = response.consume()
    with incoming.stream() as stream:
        while True:
            try:
                data += stream.blocking_read(64 * 1024)
            except Err as e:
                if isinstance(e.value, StreamError_Closed):
                    break
                raise RuntimeError(f"POST {url}: reading the response: {e.value}")
    return response.status(), bytes(data)


class WitWorld(wit_world.WitWorld):
    def handle(self, task):
        try:
            data = json.loads(task.data)
        except ValueError as e:
            raise error("invalid-input", f"data is not JSON: {e}", False)
        url = data.get("url") if isinstance(data, dict) else None
        if not isinstance(url, str):
            raise error("invalid-input", 'data has no "url"', False)
        try:
            status, body = post(url, json.dumps(data.get("payload"), separators=(",", ":")).encode())
        except (RuntimeError, Err) as e:
            # A refused or failed request: the host's log says which, and why.
            raise error("request-failed", str(e.value if isinstance(e, Err) else e), True)
        text = body[:1000].decode("utf-8", "replace")
        if status >= 500:
            raise error("http-5xx", f"POST {url} answered {status}: {text}", True)
        if status >= 400:
            raise error("http-4xx", f"POST {url} answered {status}: {text}", False)
        return json.dumps({"status": status, "response": text})
