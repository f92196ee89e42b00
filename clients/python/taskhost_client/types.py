"""The API's answers as Python's type checkers see them: `TypedDict`s of the JSON `Client` returns
(the server's own description is `GET /api/openapi.json`; the client's test checks these
against it). A key a class marks optional may be missing or null."""

from __future__ import annotations

from typing import Any, List, Literal, Optional, TypedDict

TaskState = Literal["waiting", "scheduled", "running", "awaiting-retry", "succeeded", "dead", "cancelled"]
"""Where a task is: `FINAL_STATES` are the last three."""

RunStatus = Literal["scheduled", "running", "success", "error", "timeout", "cancelled", "snoozed", "waiting"]
"""A run's status (and a task's `last_status`: its latest run's)."""

UniqueStates = Literal["unfinished", "succeeded", "any"]

ErrorSource = Literal["host", "guest"]


class _TaskInputRequired(TypedDict):
    handler: str


class TaskInput(_TaskInputRequired, total=False):
    """A task to queue, as `enqueue_many` takes it (`TASK_FIELDS`)."""

    data: Any
    queue: str
    priority: int
    max_attempts: int
    key: str
    unique_key: str
    unique_for: str
    unique_states: UniqueStates
    queued_by: str
    at: str
    """An RFC 3339 time with its zone, e.g. "2026-12-01T09:00:00Z"."""
    run_timeout: str
    """e.g. "90s"."""
    after: List[int]
    run_anyway: bool
    version: str


class BackoffSettings(TypedDict, total=False):
    base_ms: Optional[int]
    max_ms: Optional[int]


class _TaskRequired(TypedDict):
    id: int
    queued_on: str
    scheduled_on: str
    handler: str
    data: Any
    state: TaskState
    last_status: RunStatus
    max_attempts: int
    task_runs_failed: int
    snoozes: int
    depth: int
    waiting_for: int
    queue: str
    priority: int
    unique_states: UniqueStates
    backoff: BackoffSettings


class Task(_TaskRequired, total=False):
    """A task as `get` and `wait` answer it (`TaskDetail.task`)."""

    awaiting_signal: Optional[str]
    awaiting_until: Optional[str]
    gave_up_on: Optional[str]
    key: Optional[str]
    last_error: Optional[str]
    parent_id: Optional[int]
    queued_by: Optional[str]
    run_timeout_secs: Optional[int]
    unique_key: Optional[str]
    unique_until: Optional[str]
    version: Optional[str]


class _RunRequired(TypedDict):
    id: int
    task_id: int
    attempt: int
    created_on: str
    percents_completed: int
    status: RunStatus
    logs: List[str]


class Run(_RunRequired, total=False):
    """A run of a task (`TaskDetail.runs`, oldest first)."""

    component_digest: Optional[str]
    duration_ms: Optional[int]
    error_code: Optional[str]
    error_message: Optional[str]
    error_source: Optional[ErrorSource]
    finished_on: Optional[str]
    fuel_used: Optional[int]
    results: Any
    runner_id: Optional[int]
    started_on: Optional[str]


class Dependency(TypedDict):
    """A task another runs after, and where it is."""

    id: int
    state: TaskState


class _SignalRequired(TypedDict):
    id: int
    task_id: int
    name: str
    data: Any
    sent_on: str


class Signal(_SignalRequired, total=False):
    read_by_run: Optional[int]


class _TaskDetailRequired(TypedDict):
    task: Task
    runs: List[Run]
    allows: List[str]


class TaskDetail(_TaskDetailRequired, total=False):
    """What `get` and `wait` answer: the task, its runs, what may be done to it now (`allows`), the
    tasks it runs after and its signals."""

    after: List[Dependency]
    signals: List[Signal]


class _TaskBriefRequired(TypedDict):
    id: int
    queue: str
    handler: str
    state: TaskState
    attempt: int
    failures: int


class TaskBrief(_TaskBriefRequired, total=False):
    """A task as the event stream tells it (`("task", brief)`): `progress` while it runs,
    `finished_on` once final."""

    progress: Optional[int]
    finished_on: Optional[str]


class _CancelledRequired(TypedDict):
    id: int
    cancelled: bool


class Cancelled(_CancelledRequired, total=False):
    """What `cancel` answers: `children_cancelled` (how many) with `with_children`."""

    children_cancelled: Optional[int]


class Retried(TypedDict):
    """What `retry` answers: the attempt its next run will be."""

    id: int
    attempt: int


class SignalSent(TypedDict):
    """What `signal` answers: the signal's own id (not the task's), and whether its task awaited
    it and is now due (`woke`; else it is kept until a run of the task awaits it)."""

    id: int
    woke: bool
