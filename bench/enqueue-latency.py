#!/usr/bin/env python3
"""Single enqueues through `taskhost serve`, one at a time, from another process: what a web app
queueing one task per request pays. Standard library only.

    python3 bench/enqueue-latency.py http://127.0.0.1:8080 HANDLER [N]

Prints one JSON line: the handler, N, and the p50, p90 and p99 of each POST's round trip in ms
(the first 20 requests warm up and are not counted).
"""

import http.client
import json
import sys
import time
import urllib.parse


def main() -> None:
    base, handler = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = json.dumps({"handler": handler, "data": {"n": 1}})
    headers = {"Content-Type": "application/json"}
    took = []
    for i in range(n + 20):
        started = time.perf_counter()
        conn.request("POST", "/api/v1/tasks", body=body, headers=headers)
        answer = conn.getresponse()
        text = answer.read()
        if answer.status != 201:
            sys.exit(f"{answer.status}: {text.decode(errors='replace')}")
        if i >= 20:
            took.append((time.perf_counter() - started) * 1000)
    took.sort()
    pick = lambda q: round(took[min(len(took) - 1, int(q * len(took)))], 2)
    print(json.dumps({"handler": handler, "n": n, "p50_ms": pick(0.5), "p90_ms": pick(0.9), "p99_ms": pick(0.99)}))


if __name__ == "__main__":
    main()
