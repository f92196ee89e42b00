"""An application's use of the Python client, for `mypy --strict` (tests/it/clients.rs): each
answer read through its type, so a type that no longer fits the client fails the check."""
from typing import List, Optional

from taskhost_client import AsyncClient, Cancelled, Client, Queued, Retried, TaskBrief, TaskDetail, TaskhostError, TaskInput, TaskState


def use(client: Client) -> List[str]:
    said: List[str] = []
    task_id: int = client.enqueue("mail", {"to": "a@example.com"}, queue="mail", priority=2)
    queued: Queued = client.enqueue_unique("digest", None, unique_key="digest-1", unique_states="any")
    if not queued.created:
        said.append(f"held by {queued.id}")
    batch: List[TaskInput] = [{"handler": "echo", "data": {"n": 1}}, {"handler": "echo", "queue": "q", "after": [task_id]}]
    ids: List[int] = client.enqueue_many(batch)
    told: List[Queued] = client.enqueue_many_unique(batch)
    said += [str(q.created) for q in told]
    done: TaskDetail = client.wait(ids[0], timeout=None)
    state: TaskState = done["task"]["state"]
    last = done["runs"][-1]
    code: Optional[str] = last.get("error_code")
    said += [state, last["status"], code or "", str(last.get("results"))]
    for dep in done.get("after", []):
        said.append(f"{dep['id']} {dep['state']}")
    cancelled: Cancelled = client.cancel(task_id, with_children=True)
    retried: Retried = client.retry(task_id)
    said.append(f"{cancelled['cancelled']} {cancelled.get('children_cancelled')} {retried['attempt']}")
    try:
        client.get(0)
    except TaskhostError as e:
        said.append(f"{e.status} {e.code}")
    with client.events(queue="mail") as stream:
        for kind, data in stream:
            if kind == "task":
                brief: TaskBrief = data
                said.append(f"{brief['state']} {brief.get('progress')}")
            else:
                said.append(data["reason"])
            break
    return said


async def use_async(client: AsyncClient) -> List[str]:
    said: List[str] = []
    task_id: int = await client.enqueue("mail", {"to": "a@example.com"}, queue="mail")
    told: List[Queued] = await client.enqueue_many_unique([{"handler": "echo", "unique_key": "k"}])
    done: TaskDetail = await client.wait(task_id, timeout=None)
    state: TaskState = done["task"]["state"]
    said += [state, str(told[0].created), str((await client.cancel(task_id))["cancelled"])]
    async with await client.events(tasks=[task_id]) as stream:
        async for kind, data in stream:
            if kind == "task":
                brief: TaskBrief = data
                said.append(brief["state"])
            break
    return said


def made(cafile: str) -> List[str]:
    """Clients made with the application's own TLS context, used in `with` blocks."""
    import ssl

    context = ssl.create_default_context(cafile=cafile)
    with Client("https://tasks.internal:8443", token="t", timeout=5.0, ssl_context=context) as client:
        return use(client)


async def made_async(cafile: str) -> List[str]:
    import ssl

    async with AsyncClient("https://tasks.internal:8443", ssl_context=ssl.create_default_context(cafile=cafile)) as client:
        return await use_async(client)
