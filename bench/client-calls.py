#!/usr/bin/env python3
"""Calls one after another through the Python clients (clients/python), each client with its
connections kept for the next call and with a connection a call (nothing kept: what each client
did before keeping them), alternated in one sitting: what an application pays a call.

    python3 bench/client-calls.py http://127.0.0.1:8080 HANDLER [N] [REPS]

Prints one JSON line a measure: the client, kept or not, the call (`get` of one task, `enqueue`),
and µs a call over N calls (after 20 not counted).
"""

import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python"))
from taskhost_client import AsyncClient, Client  # noqa: E402


def blocking(base, handler, n, kept):
    client = Client(base)
    if not kept:
        client._pool.size = 0
    task = client.enqueue(handler, {})
    for call, run in (("get", lambda: client.get(task)), ("enqueue", lambda: client.enqueue(handler, {}))):
        for _ in range(20):
            run()
        started = time.perf_counter()
        for _ in range(n):
            run()
        yield call, (time.perf_counter() - started) / n * 1e6, client._pool.opened
    client.close()


async def asynchronous(base, handler, n, kept):
    client = AsyncClient(base)
    if not kept:
        client._pool.size = 0
    task = await client.enqueue(handler, {})
    took = []
    for call, run in (("get", lambda: client.get(task)), ("enqueue", lambda: client.enqueue(handler, {}))):
        for _ in range(20):
            await run()
        started = time.perf_counter()
        for _ in range(n):
            await run()
        took.append((call, (time.perf_counter() - started) / n * 1e6, client._pool.opened))
    await client.aclose()
    return took


def main():
    base, handler = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    for rep in range(1, reps + 1):
        for kept in (True, False):
            for name, took in (("Client", list(blocking(base, handler, n, kept))),
                               ("AsyncClient", asyncio.run(asynchronous(base, handler, n, kept)))):
                for call, us, opened in took:
                    print(json.dumps({"rep": rep, "client": name, "kept": kept, "call": call, "n": n,
                                      "us_a_call": round(us), "connections": opened}), flush=True)


if __name__ == "__main__":
    main()
