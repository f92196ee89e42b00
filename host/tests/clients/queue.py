"""A Python application using taskhost's HTTP API with the standard library only: it queues a
task and a batch, polls them to their end and prints their results as one JSON line.

    python3 queue.py BASE_URL [TOKEN]
"""
import json
import sys
import time
import urllib.error
import urllib.request

base = sys.argv[1]
token = sys.argv[2] if len(sys.argv) > 2 else None


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


status, one = call("POST", "/tasks", {"handler": "word-count", "data": {"text": "a b a"}, "queued_by": "python"})
assert status == 201, (status, one)
status, batch = call("POST", "/tasks", {"tasks": [{"handler": "echo", "data": {"n": i}} for i in range(2)]})
assert status == 201, (status, batch)
ids = [one["id"]] + [t["id"] for t in batch["tasks"]]

# Each unfinished task is asked for again until all succeeded or the deadline passed: the
# requests themselves pace the loop.
results = {}
deadline = time.monotonic() + 60
while len(results) < len(ids):
    assert time.monotonic() < deadline, "the tasks did not finish within 60 s"
    for i in [i for i in ids if i not in results]:
        status, shown = call("GET", f"/tasks/{i}")
        assert status == 200, (status, shown)
        if shown["task"]["last_status"] == "success":
            results[i] = shown["runs"][-1]["results"]
print(json.dumps({"ids": ids, "results": [results[i] for i in ids]}))
