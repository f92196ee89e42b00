#!/usr/bin/env python3
"""Requests waiting for tasks' ends through `taskhost serve` (`GET /api/v1/tasks/ID?wait=60s`), from
another process. Standard library only.

    python3 bench/wait-latency.py idle BASE_URL SERVE_PID [N] [SECONDS]
    python3 bench/wait-latency.py ends BASE_URL [N] [SPREAD_SECONDS]

`idle`: queues N tasks due next year, holds one waiting request open on each, and prints the CPU
`serve` (SERVE_PID) spent over SECONDS (20) while they waited, as a share of one core, beside the
same span with nobody waiting.

`ends`: queues N tasks due in a few seconds, holds one waiting request on each, then (start a
worker meanwhile) prints how long after each task's end (its run's `finished_on`) its answer
came: p50, p90, p99 in ms (a worker may be started before: the tasks are not due yet). With
SPREAD_SECONDS, the tasks fall due one after another over that span, N / SPREAD a second, instead
of all at once (a burst of N ends, through which a small machine's cores, not the waits, decide how
late the last are heard), and N more requests wait throughout on tasks due next year, so that every
end is heard with at least N waiting. Both print one JSON line. WAIT_THROUGH=client: each wait
through the Python client's `AsyncClient` instead of a bare request.
"""

import asyncio
import datetime
import json
import os
import resource
import sys
import time
import urllib.parse
import urllib.request


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def queue(base, n, at):
    """N tasks due at `at` (a time, or a list of N times)."""
    times = at if isinstance(at, list) else [at] * n
    tasks = [{"handler": "noop", "data": {"i": i}, "at": times[i]} for i in range(n)]
    return [t["id"] for t in call(base, "POST", "/api/v1/tasks", {"tasks": tasks})["tasks"]]


async def wait(host, port, task_id):
    if THROUGH_CLIENT:
        shown = await THROUGH_CLIENT.wait(task_id, timeout=60)
        return time.time(), shown
    reader, writer = await asyncio.open_connection(host, port)
    request = f"GET /api/v1/tasks/{task_id}?wait=60s HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    answer = await reader.read()
    at = time.time()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise SystemExit(f"task {task_id}: {head[:80]!r}")
    return at, json.loads(body)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def waiting(base):
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("taskhost_api_waiting_requests "):
                return int(float(line.split()[1]))
    return 0


async def idle(base, pid, n, seconds):
    url = urllib.parse.urlsplit(base)
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    alone = (cpu_seconds(pid) - before) / seconds
    ids = queue(base, n, "2099-01-01T00:00:00Z")
    waits = [asyncio.ensure_future(wait(url.hostname, url.port, i)) for i in ids]
    while waiting(base) < n:
        await asyncio.sleep(0.2)
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    used = (cpu_seconds(pid) - before) / seconds
    call(base, "POST", "/api/v1/tasks/cancel", {"ids": ids})
    await asyncio.gather(*waits)
    print(json.dumps({"waiting": n, "seconds": seconds, "core_share_waiting": round(used, 4),
                      "core_share_nobody_waiting": round(alone, 4)}))


async def ends(base, n, over):
    url = urllib.parse.urlsplit(base)
    due = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
    times = [due + datetime.timedelta(seconds=over * i / n) for i in range(n)]
    ids = queue(base, n, [t.isoformat().replace("+00:00", "Z") for t in times])
    held = queue(base, n, "2099-01-01T00:00:00Z") if over else []
    holding = [asyncio.ensure_future(wait(url.hostname, url.port, i)) for i in held]
    waits = [asyncio.ensure_future(wait(url.hostname, url.port, i)) for i in ids]
    answers = await asyncio.gather(*waits)
    if held:
        call(base, "POST", "/api/v1/tasks/cancel", {"ids": held})
        await asyncio.gather(*holding)
    late, ended = [], []
    for at, shown in answers:
        finished = shown["runs"][-1]["finished_on"]
        end = datetime.datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp()
        ended.append(end)
        late.append((at - end) * 1000)
    pick = lambda xs, q: round(sorted(xs)[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else None
    spread = round((max(ended) - min(ended)) * 1000, 1)
    figures = {"through": "AsyncClient" if THROUGH_CLIENT else "request", "waiting": n, "due_over_s": over, "p50_ms": pick(late, 0.5), "p90_ms": pick(late, 0.9), "p99_ms": pick(late, 0.99),
               "runs_ended_over_ms": spread}
    # The server's side: when `serve` answered each (its JSON log, SERVE_LOG), after the end; and
    # when the worker committed each end (its JSON log, WORKER_LOG), so the delay splits in two.
    ends_of = {shown["task"]["id"]: end for (_, shown), end in zip(answers, ended)}
    answered = logged_at(os.environ.get("SERVE_LOG"), "a wait answered at its task's end")
    written = logged_at(os.environ.get("WORKER_LOG"), "outcome written")
    if answered:
        server = [(answered[i] - e) * 1000 for i, e in ends_of.items() if i in answered]
        figures.update({"serve_p50_ms": pick(server, 0.5), "serve_p99_ms": pick(server, 0.99),
                        "serve_answered": len(server)})
    if written:
        commit = [(written[i] - e) * 1000 for i, e in ends_of.items() if i in written]
        figures.update({"written_p50_ms": pick(commit, 0.5), "written_p99_ms": pick(commit, 0.99)})
    if answered and written:
        after = [(answered[i] - written[i]) * 1000 for i in ends_of if i in answered and i in written]
        figures.update({"serve_after_commit_p50_ms": pick(after, 0.5),
                        "serve_after_commit_p99_ms": pick(after, 0.99)})
    print(json.dumps(figures))


def logged_at(path, message):
    """Task id -> when a JSON log (`--log-format json`) at `path` said `message` of it."""
    if not path:
        return {}
    at = {}
    with open(path) as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            fields = event.get("fields", {})
            if fields.get("message") == message:
                stamp = event["timestamp"].replace("Z", "+00:00")
                # Python before 3.11 reads at most six digits of a second.
                head, _, rest = stamp.partition(".")
                digits = "".join(c for c in rest if c.isdigit())
                zone = rest[len(digits):]
                at[int(fields["task"])] = datetime.datetime.fromisoformat(f"{head}.{digits[:6]}{zone}").timestamp()
    return at


#: With WAIT_THROUGH=client, each wait is the Python client's `AsyncClient.wait` (clients/python,
#: from this repository), as an asyncio application waits, instead of a bare request.
THROUGH_CLIENT = None


def main():
    global THROUGH_CLIENT
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if os.environ.get("WAIT_THROUGH") == "client":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
        from taskhost_client import AsyncClient
        THROUGH_CLIENT = AsyncClient(sys.argv[2], timeout=60)
    if sys.argv[1] == "idle":
        n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
        seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 20
        asyncio.run(idle(sys.argv[2], int(sys.argv[3]), n, seconds))
    else:
        n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
        asyncio.run(ends(sys.argv[2], n, float(sys.argv[4]) if len(sys.argv) > 4 else 0.0))


if __name__ == "__main__":
    main()
