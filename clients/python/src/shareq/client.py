"""The client: one JSON request per line on ``<state>/shareq.sock``, one JSON answer per
line (docs/API.md). The kernel tells the scheduler who is calling (peer credentials):
nothing in a request names a user, so a client acts exactly as its process's user may.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .errors import NotRunning, ProtocolError, ShareqError, from_answer

#: The protocol version this client speaks.
API_VERSION = 1

#: The states of a job that has ended.
FINISHED = ("SUCCEEDED", "FAILED")

#: How often a submit whose answer was lost is sent (with the same client token), as the
#: CLI does.
SUBMIT_TRIES = 4

_ALL_STATES = ("RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
_STATE_WORDS = {
    "queued": ("RUNNABLE",),
    "running": ("SCHEDULED", "STARTING", "RUNNING"),
    "finished": FINISHED,
}

Strings = Union[str, Iterable[str]]
#: An instant: milliseconds since the Unix epoch (the API's unit), or a timezone-aware
#: :class:`~datetime.datetime`.
When = Union[datetime, int, None]
#: A job: its id, or ``"P:I"`` for child I of array P (as the CLI takes it).
JobRef = Union[int, str]

#: Where the system scheduler keeps its state (docs/DEPLOY.md).
SYSTEM_STATE = "/var/lib/shareq"


def _own_state_dir(env: Mapping[str, str]) -> Optional[str]:
    """The user's own state directory: ``$XDG_STATE_HOME/shareq``, else
    ``~/.local/state/shareq`` (``None`` without either variable)."""
    x = env.get("XDG_STATE_HOME")
    if x:
        return os.path.join(x, "shareq")
    h = env.get("HOME")
    if h:
        return os.path.join(h, ".local/state/shareq")
    return None


def default_state_dir(
    env: Optional[Mapping[str, str]] = None,
    exists: Optional[Callable[[str], bool]] = None,
) -> str:
    """The state directory the CLI talks to without ``--state``, found the same way
    (docs/DEPLOY.md, "Where the CLI looks for the scheduler"): ``$SHAREQ_STATE``; else the
    user's own (``$XDG_STATE_HOME/shareq``, else ``~/.local/state/shareq``) when a
    scheduler listens there (its ``shareq.sock`` exists); else the system scheduler's
    ``/var/lib/shareq`` when one listens there; else the user's own. Empty variables count
    as unset. ``env`` and ``exists`` (a path test) default to the process's. Raises
    :class:`ShareqError` when none can be found."""
    env = os.environ if env is None else env
    exists = os.path.exists if exists is None else exists
    s = env.get("SHAREQ_STATE")
    if s:
        return s
    own = _own_state_dir(env)
    if own is not None and exists(os.path.join(own, "shareq.sock")):
        return own
    if exists(os.path.join(SYSTEM_STATE, "shareq.sock")):
        return SYSTEM_STATE
    if own is not None:
        return own
    raise ShareqError("no state directory: pass state=DIR or set SHAREQ_STATE")


def _job_ref(id: JobRef) -> Union[int, str]:
    """A job as the API takes it: an int, or ``"P:I"`` for an array's child; raises
    :class:`ValueError` (with the CLI's words) for anything else."""
    if isinstance(id, bool):
        raise TypeError(f"{id!r} is not a job id")
    if isinstance(id, int):
        if id < 1:
            raise ValueError(f"`{id}` is not a job id (a number, or PARENT:INDEX for an array's child)")
        return id
    text = str(id).strip()
    parent, sep, index = text.partition(":")
    if parent.isdigit() and int(parent) > 0 and (not sep or index.isdigit()):
        return f"{int(parent)}:{int(index)}" if sep else int(parent)
    raise ValueError(
        f"`{id}` is not a job id (a number, or PARENT:INDEX for an array's child)"
    )


def gib(v: Union[int, str]) -> int:
    """GiB of GPU memory as ``submit --gpu-memory`` reads them: ``20``, ``"20G"``,
    ``"20GiB"`` (whole GiB, at least 1)."""
    if isinstance(v, bool):
        raise ValueError(f"gpu_memory {v!r}: expected whole GiB, as 20, '20G' or '20GiB'")
    if isinstance(v, int):
        n = v
    else:
        t = str(v).strip()
        for suffix in ("GiB", "G"):
            if t.endswith(suffix):
                t = t[: -len(suffix)].strip()
                break
        if not t.isdigit():
            raise ValueError(f"gpu_memory {v!r}: expected whole GiB, as 20, '20G' or '20GiB'")
        n = int(t)
    if n < 1:
        raise ValueError(f"gpu_memory {v!r}: a job needs at least 1 GiB")
    return n


def _snake(name: str) -> str:
    """``preemptedCount`` -> ``preempted_count``: a key's old name (docs/API.md,
    "Key names")."""
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _key(v: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """Key ``name`` (camelCase, as the scheduler writes its keys) of an answer's object,
    or its old snake_case name where only that is present (a scheduler of an earlier
    release), else ``default``."""
    if name in v:
        return v[name]
    return v.get(_snake(name), default)


def _time(ms: Optional[int]) -> Optional[datetime]:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def _ms(t: When) -> Optional[int]:
    """An instant in the API's unit: ms since the epoch (an int, as given) or a
    timezone-aware datetime. A naive datetime is refused: it names no instant."""
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None or t.tzinfo.utcoffset(t) is None:
            raise ValueError(
                f"{t!r} has no timezone: give an aware datetime "
                "(e.g. datetime.now(timezone.utc)) or ms since the epoch"
            )
        return int(t.timestamp() * 1000)
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError(
            f"{t!r}: give ms since the epoch (an int, the API's unit) or an aware datetime"
        )
    return t


def _strings(v: Optional[Strings]) -> List[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [p for p in v.split(",") if p]
    return list(v)


def quota_share(
    name: str,
    gpus: int,
    strategy: str = "RESERVE",
    borrow_limit: Optional[int] = None,
    in_share_preemption: bool = False,
    unit: str = "gpu",
    members: Optional[Sequence[str]] = None,
    enabled: bool = True,
) -> Dict[str, Any]:
    """A ``QuotaShare`` config document (docs/CONFIG.md) for :meth:`Client.put_config`,
    with the AWS Batch API's names: ``gpus`` of ``unit`` guaranteed (``maxCapacity``),
    ``strategy`` ``RESERVE``, ``LEND`` or ``LEND_AND_BORROW``, ``borrow_limit`` (a
    percentage of ``gpus``; only with ``LEND_AND_BORROW``; ``None``: no cap),
    ``in_share_preemption``, ``members`` (user names or ``@group``s; ``None``: everyone)
    and ``enabled`` (``state``). The scheduler validates it."""
    sharing: Dict[str, Any] = {"strategy": strategy}
    if borrow_limit is not None:
        sharing["borrowLimit"] = int(borrow_limit)
    doc: Dict[str, Any] = {
        "kind": "QuotaShare",
        "quotaShareName": name,
        "capacityLimits": [{"capacityUnit": unit, "maxCapacity": int(gpus)}],
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {
            "inSharePreemption": "ENABLED" if in_share_preemption else "DISABLED"
        },
        "state": "ENABLED" if enabled else "DISABLED",
    }
    if members is not None:
        doc["members"] = list(members)
    return doc


#: The most nodes a multi-node job may ask for (SPEC §16).
MAX_NODES = 64


def shape(
    gpus: Optional[int], nodes: Optional[int], gpus_per_node: Optional[int]
) -> Tuple[int, Optional[int]]:
    """A submission's ``quantity`` and ``numNodes``, as ``submit --gpus/--nodes/
    --gpus-per-node`` make them (SPEC §16): ``gpus`` is always the job's GPUs in all, so
    beside ``nodes`` it must split evenly and agree with ``gpus_per_node``. Raises
    ValueError, saying what to write instead, on a contradiction."""
    if nodes is None:
        if gpus_per_node is not None:
            raise ValueError(
                f"gpus_per_node={gpus_per_node} is for a multi-node job: add nodes=N "
                f"(2..{MAX_NODES}), or ask for a job on one node with gpus={gpus_per_node}"
            )
        return (1 if gpus is None else int(gpus)), None
    nodes = int(nodes)
    if not 2 <= nodes <= MAX_NODES:
        raise ValueError(
            f"nodes={nodes}: a multi-node job runs on 2..{MAX_NODES} nodes; a job on one "
            "node leaves out nodes and asks with gpus"
        )
    if gpus is None:
        per_node = 1 if gpus_per_node is None else int(gpus_per_node)
    elif gpus_per_node is not None:
        per_node = int(gpus_per_node)
        if int(gpus) != nodes * per_node:
            raise ValueError(
                f"gpus={gpus} counts the job's GPUs in all, and nodes={nodes} × "
                f"gpus_per_node={per_node} is {nodes * per_node}: give one of gpus and "
                "gpus_per_node, or make them agree"
            )
    else:
        if int(gpus) % nodes:
            raise ValueError(
                f"gpus={gpus} counts the job's GPUs in all, and {gpus} does not split "
                f"evenly over nodes={nodes}: say the GPUs of each node with gpus_per_node"
            )
        per_node = int(gpus) // nodes
    return per_node, nodes


@dataclass(frozen=True)
class Job:
    """One job as the scheduler shows it (a ``JobView`` of docs/API.md). Times are
    timezone-aware UTC datetimes; ``raw`` is the object as the scheduler sent it."""

    id: int
    name: str
    share: str
    unit: str
    #: GPUs (``quantity``).
    gpus: int
    priority: int
    #: ``PENDING``, ``RUNNABLE``, ``SCHEDULED``, ``STARTING``, ``RUNNING``, ``SUCCEEDED``
    #: or ``FAILED`` (an array parent's: its children's summary).
    state: str
    #: Why it waits (queued), what it does, or why it failed.
    reason: str
    devices: List[int]
    node: Optional[str]
    #: The submitter's user name (``None`` only for jobs stored before shareq knew).
    user: Optional[str]
    uid: Optional[int]
    submitted: datetime
    started: Optional[datetime]
    finished: Optional[datetime]
    #: Queued jobs: the forecast's estimated start, when there is one.
    estimated_start: Optional[datetime]
    estimate_note: Optional[str]
    attempts: int
    preempted_count: int
    command: str
    on_borrowed: bool
    #: Being stopped: (why, since when).
    stopping: Optional[tuple]
    #: An array child's parent id and index (the child is ``f"{parent}:{array_index}"``).
    parent: Optional[int] = None
    array_index: Optional[int] = None
    #: The jobs it waits (or waited) for: ``[{"job": 12, "label": "12", "state": ...}]``.
    depends_on: List[Dict[str, Any]] = field(default_factory=list)
    #: An array parent: ``{"size": N, "counts": {"RUNNING": 8, ...}}``.
    array: Optional[Dict[str, Any]] = None
    #: Queued jobs: the estimate's range (SPEC §11): earliest and latest start, and its
    #: kind (``range``, ``lower_bound``, ``beyond_horizon``, ``overdue``).
    estimated_start_earliest: Optional[datetime] = None
    estimated_start_latest: Optional[datetime] = None
    estimate_kind: Optional[str] = None
    #: A multi-node job (a gang, SPEC §16): its nodes (``gpus`` counts all of them).
    num_nodes: Optional[int] = None
    #: A gang holding GPUs: every node with its devices there, in rank order:
    #: ``[{"node": "gpu1", "devices": [0, 1]}, ...]`` (``node``/``devices`` are rank 0's).
    placements: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def gpus_per_node(self) -> int:
        """Its GPUs on each of its nodes (``gpus`` for a job on one node)."""
        return self.gpus // max(1, self.num_nodes or 1)

    @property
    def done(self) -> bool:
        """Has the job ended (SUCCEEDED or FAILED)?"""
        return self.state in FINISHED

    @classmethod
    def from_view(cls, v: Dict[str, Any]) -> "Job":
        """A Job from the protocol's ``JobView`` object."""
        sub = v.get("submitter") or {}
        stopping = v.get("stopping")
        return cls(
            id=int(v["id"]),
            name=v["name"],
            share=v["share"],
            unit=v["unit"],
            gpus=int(v["quantity"]),
            priority=int(v["priority"]),
            state=v["state"],
            reason=v.get("reason") or "",
            devices=list(v.get("devices") or []),
            node=v.get("node"),
            user=sub.get("name"),
            uid=sub.get("uid"),
            submitted=_time(v["submitted"]),  # type: ignore[arg-type]
            started=_time(v.get("started")),
            finished=_time(v.get("finished")),
            estimated_start=_time(v.get("estimatedStart")),
            estimate_note=v.get("estimateNote"),
            attempts=int(v.get("attempts", 0)),
            preempted_count=int(_key(v, "preemptedCount", 0)),
            command=v.get("command") or "",
            on_borrowed=bool(_key(v, "onBorrowed")),
            stopping=(stopping[0], _time(stopping[1])) if stopping else None,
            parent=v.get("parent"),
            array_index=v.get("arrayIndex"),
            depends_on=list(v.get("dependsOn") or []),
            array=v.get("array"),
            estimated_start_earliest=_time(v.get("estimatedStartEarliest")),
            estimated_start_latest=_time(v.get("estimatedStartLatest")),
            estimate_kind=v.get("estimateKind"),
            num_nodes=v.get("numNodes"),
            placements=list(v.get("placements") or []),
            raw=v,
        )


class Client:
    """A client of the scheduler on one state directory.

    ``state``: the state directory (default: as the CLI finds it, the system scheduler's
    ``/var/lib/shareq`` included; see :func:`default_state_dir`). ``timeout``: seconds one request may take (``None``: no
    limit). Each call opens its own connection, so one Client may be shared by threads.
    """

    def __init__(self, state: Optional[str] = None, timeout: Optional[float] = 60.0) -> None:
        self.state = os.fspath(state) if state is not None else default_state_dir()
        self.socket_path = os.path.join(self.state, "shareq.sock")
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"shareq.Client(state={self.state!r})"

    # -- the wire -------------------------------------------------------------------

    def _connect(self, timeout: Optional[float]) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.socket_path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            s.close()
            raise NotRunning(
                f"no scheduler is listening on {self.socket_path}\n"
                f"start one with: shareq serve --config DIR --state {self.state}"
            ) from e
        except OSError as e:
            s.close()
            raise ProtocolError(f"cannot connect to {self.socket_path}: {e}") from e
        return s

    def _receive(self, reader: Any) -> bytes:
        """Read one answer line (a seam for tests that drop the connection)."""
        return reader.readline()

    def _call(self, request: Dict[str, Any]) -> Dict[str, Any]:
        """Send one request on a new connection and return its ``ok`` answer; an error
        answer is raised as the exception of its ``code``."""
        line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        s = self._connect(self.timeout)
        try:
            with s, s.makefile("rb") as reader:
                try:
                    s.sendall(line)
                except BrokenPipeError:
                    pass  # refused before it was read whole (too large): its answer waits
                answer = self._receive(reader)
        except OSError as e:
            raise ProtocolError(f"talking to the scheduler on {self.socket_path}: {e}") from e
        if not answer:
            raise ProtocolError(
                f"talking to the scheduler on {self.socket_path}: "
                "the scheduler closed the connection"
            )
        try:
            a = json.loads(answer)
        except ValueError as e:
            raise ProtocolError(f"the scheduler sent an answer that is not valid: {e}") from e
        if not isinstance(a, dict):
            raise ProtocolError("the scheduler sent an answer that is not an object")
        if not a.get("ok"):
            raise from_answer(a)
        return a

    # -- the calls ------------------------------------------------------------------

    def hello(self) -> Dict[str, Any]:
        """The scheduler's protocol versions and release, and who it takes this caller
        for: ``{"api": 1, "apis": [1], "version": "...", "user": "alice", "uid": 1000,
        "admin": False}``. Raises :class:`~shareq.UnsupportedApi` when it does not speak
        this client's version."""
        return self._call({"op": "hello", "api": API_VERSION})["hello"]

    @staticmethod
    def _spec(
        share: str,
        command: Union[str, Sequence[str]],
        gpus: int,
        name: Optional[str],
        priority: int,
        env: Optional[Mapping[str, str]],
        timeout: Optional[float],
        unit: Optional[str],
        cwd: Optional[str],
        attempts: Optional[int],
        preemption_retries: Optional[int],
        client_token: Optional[str],
        after: Optional[Sequence[Union[int, str]]] = None,
        array: Optional[int] = None,
        expect: Optional[float] = None,
        nodes: Optional[int] = None,
    ) -> Dict[str, Any]:
        if isinstance(command, str):
            cmd: Union[str, List[str]] = command
            first = command
        else:
            cmd = [str(a) for a in command]
            if not cmd:
                raise ValueError("command is empty")
            first = cmd[0]
        if name is None:
            word = (first.split() or ["job"])[0]
            name = word.rsplit("/", 1)[-1][:128]
        spec: Dict[str, Any] = {
            "jobName": name,
            "quotaShareName": share,
            "quantity": int(gpus),
            "schedulingPriority": int(priority),
            "command": cmd,
            "workingDirectory": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "clientToken": client_token or secrets.token_hex(16),
        }
        if unit is not None:
            spec["capacityUnit"] = unit
        if env:
            for k, v in env.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise TypeError(f"env: {k!r}={v!r}: names and values must be str")
            spec["env"] = dict(env)
        if timeout is not None:
            spec["timeoutSeconds"] = int(math.ceil(timeout))
        if expect is not None:
            spec["expectedRuntimeSeconds"] = max(1, int(math.ceil(expect)))
        if attempts is not None:
            spec["retryStrategy"] = {"attempts": int(attempts)}
        if preemption_retries is not None:
            spec["preemptionRetriesBeforeTermination"] = int(preemption_retries)
        deps: List[Dict[str, Any]] = []
        for a in after or []:
            text = str(a).strip()
            if text.upper() == "SEQUENTIAL":
                deps.append({"type": "SEQUENTIAL"})
            elif text.upper().startswith("N_TO_N:"):
                deps.append({"jobId": text.split(":", 1)[1], "type": "N_TO_N"})
            else:
                deps.append({"jobId": int(a) if isinstance(a, int) else text})
        if deps:
            spec["dependsOn"] = deps
        if array is not None:
            spec["arrayProperties"] = {"size": int(array)}
        if nodes is not None:
            spec["numNodes"] = int(nodes)
        return spec

    def submit(
        self,
        share: str,
        command: Union[str, Sequence[str]],
        gpus: Optional[int] = None,
        name: Optional[str] = None,
        priority: int = 0,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        unit: Optional[str] = None,
        cwd: Optional[str] = None,
        attempts: Optional[int] = None,
        preemption_retries: Optional[int] = None,
        client_token: Optional[str] = None,
        after: Optional[Sequence[Union[int, str]]] = None,
        array: Optional[int] = None,
        gpu_memory: Union[int, str, None] = None,
        expect: Optional[float] = None,
        nodes: Optional[int] = None,
        gpus_per_node: Optional[int] = None,
    ) -> Job:
        """Queue a job and return it (as the scheduler shows it right after).

        ``after``: jobs to wait for, as ``submit --after`` takes them (``12``, ``"12:3"``,
        ``"N_TO_N:12"``, ``"SEQUENTIAL"``); the job is PENDING until they have all
        SUCCEEDED. ``array``: make an array of that many children (2..10000); the Job
        returned is its parent.

        ``command``: a list runs as argv, a string with ``sh -c``. ``gpus``: GPUs of
        ``unit`` (default: the environment's only unit). ``priority``: 0..9999, higher
        first. ``timeout``: seconds per attempt. ``expect``: how long you expect it to run,
        in seconds (``submit --expect``): the start estimates of the jobs behind it use it. ``cwd``: the working directory (default:
        this process's). ``attempts``: tries for non-zero exits (1..10).
        ``preemption_retries``: preemptions allowed before the job fails. ``name``:
        default the command's first word. ``gpu_memory``: GiB of one GPU on a unit sliced
        by memory (``20``, ``"20G"`` or ``"20GiB"``, as ``submit --gpu-memory``), instead
        of ``gpus`` (``unit``: default the environment's only sliced unit); the job gets one
        device and ``SHAREQ_GPU_MEMORY_GIB``.

        ``nodes``: a multi-node job (a gang, SPEC §16, ``submit --nodes``): 2..64 distinct
        nodes at once, all or none, with ``gpus_per_node`` GPUs on each (default 1); it
        needs an environment with ``nodes``. ``gpus`` stays the job's GPUs in all: beside
        ``nodes`` it must split evenly (``nodes=2, gpus=8``: 4 on each) and agree with
        ``gpus_per_node``; a contradiction raises ValueError before anything is sent.

        Every submit carries a client token (``client_token``, default 128 random bits):
        when the answer is lost (the connection broke after the request went out) it is
        sent again with the same token, up to 4 times as the CLI does, and the scheduler
        answers with the job the first request made: a retry never queues a second job.

        Raises :class:`~shareq.Rejected` (``.reason``), :class:`~shareq.NotAllowed`,
        :class:`~shareq.LimitExceeded`, :class:`~shareq.NotRunning`.
        """
        quantity, num_nodes = shape(gpus, nodes, gpus_per_node)
        if gpu_memory is not None:
            if nodes is not None:
                raise ValueError("gpu_memory cannot be used with nodes")
            quantity = gib(gpu_memory)
            unit = self._slice_unit(unit)
        spec = self._spec(
            share, command, quantity, name, priority, env, timeout, unit, cwd, attempts,
            preemption_retries, client_token, after, array, expect, num_nodes,
        )
        answer = self._submit_with_retries({"op": "submit", "job": spec})
        return self.job(int(answer["id"]))

    def _slice_unit(self, unit: Optional[str]) -> str:
        """The unit ``gpu_memory`` asks GiB of, as ``submit --gpu-memory`` picks it:
        ``unit`` when it is sliced by memory, else the environment's only sliced unit."""
        units = {u["name"]: u.get("memoryGiB") for u in self.status().get("units", [])}
        sliced = [n for n, g in units.items() if g is not None]
        if unit is not None:
            if unit in sliced or unit not in units:
                return unit  # an unknown unit: the scheduler's refusal names it
            raise ValueError(
                f"gpu_memory asks GiB of a unit sliced by memory, and unit {unit!r} "
                "counts whole GPUs (use gpus=)"
            )
        if len(sliced) == 1:
            return sliced[0]
        if not sliced:
            raise ValueError("gpu_memory: no unit of this environment is sliced by memory")
        raise ValueError(
            f"gpu_memory: several units are sliced by memory ({', '.join(sliced)}): "
            "say which with unit="
        )

    def _submit_with_retries(self, request: Dict[str, Any]) -> Dict[str, Any]:
        tries = 0
        lost = False
        while True:
            tries += 1
            try:
                return self._call(request)
            except ProtocolError as e:
                lost = True
                failure: ShareqError = e
            except NotRunning as e:
                if not lost or e.code is not None:
                    raise  # nothing was sent, or the scheduler answered
                failure = e
            if tries >= SUBMIT_TRIES:
                raise ShareqError(
                    "the answer to this submit was lost and the scheduler did not answer "
                    "again in time: the job may have been queued; look with "
                    "`shareq jobs --all` (or retry with the same client_token="
                    f"{request['job']['clientToken']!r})"
                ) from failure
            time.sleep(0.2 * (2**tries))

    def predict(
        self,
        share: str,
        command: Union[str, Sequence[str]],
        gpus: Optional[int] = None,
        name: Optional[str] = None,
        priority: int = 0,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        unit: Optional[str] = None,
        expect: Optional[float] = None,
        nodes: Optional[int] = None,
        gpus_per_node: Optional[int] = None,
    ) -> Dict[str, Any]:
        """What the job would do if submitted now (start, borrow, preempt, wait or be
        rejected) and its estimated start, decided by the real scheduler on a copy of its
        state; nothing is submitted (``shareq submit --predict --json``). ``nodes``,
        ``gpus_per_node``: a gang, as for :meth:`submit`."""
        quantity, num_nodes = shape(gpus, nodes, gpus_per_node)
        spec = self._spec(
            share, command, quantity, name, priority, env, timeout, unit, None, None, None,
            None, expect=expect, nodes=num_nodes,
        )
        return self._call({"op": "predict", "job": spec})["prediction"]

    def job(self, id: JobRef) -> Job:
        """One job by id (or ``"P:I"``, child I of array P), queued, running or finished;
        a finished one with its last attempt's ``started``. Raises
        :class:`~shareq.NotFound`."""
        return Job.from_view(self._call({"op": "job", "id": _job_ref(id)})["job"])

    def wait(self, id: JobRef, timeout: Optional[float] = None, poll: float = 0.5) -> Job:
        """Wait until the job has ended and return it (its ``state`` is SUCCEEDED or
        FAILED). Raises :class:`TimeoutError` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = min(0.05, poll)
        while True:
            j = self.job(id)
            if j.done:
                return j
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"job {id} has not ended after {timeout} s (it is {j.state}: {j.reason})"
                    )
                pause = min(pause, left)
            time.sleep(pause)
            pause = min(pause * 2, poll)

    def jobs_answer(
        self, all: bool = False, since: When = None, until: When = None
    ) -> Dict[str, Any]:
        """The ``jobs`` answer as the scheduler sends it: ``queue``, ``running``,
        ``finished`` (with ``all``), ``preemptions`` (the same object as
        ``shareq jobs --json``). ``since``/``until`` (ms since the epoch, or timezone-aware
        datetimes) keep the jobs queued or running at some instant between them, and imply
        ``all``."""
        ranged = since is not None or until is not None
        req: Dict[str, Any] = {"op": "jobs", "all": bool(all or ranged)}
        if since is not None:
            req["since"] = _ms(since)
        if until is not None:
            req["until"] = _ms(until)
        return self._call(req)["jobs"]

    def jobs(
        self,
        share: Optional[Strings] = None,
        user: Optional[Strings] = None,
        status: Optional[Strings] = None,
        name: Optional[str] = None,
        all: Optional[bool] = None,
    ) -> List[Job]:
        """Jobs that match every filter given, running first, then the queue in
        scheduling order, then finished ones newest first (as ``shareq jobs`` lists them).

        ``share``, ``user``: one name, a comma-separated list or a list. ``status``: job
        states (``RUNNABLE``, ``RUNNING``, ...) or ``queued``, ``running``
        (SCHEDULED/STARTING/RUNNING), ``finished``, case-insensitive. ``name``: text the
        job's name contains. ``all``: include finished jobs (default: only when
        ``status`` asks for a finished state).
        """
        states: List[str] = []
        for s in _strings(status):
            word = s.lower()
            if word in _STATE_WORDS:
                states.extend(_STATE_WORDS[word])
            elif s.upper() in _ALL_STATES:
                states.append(s.upper())
            else:
                raise ValueError(
                    f"status {s!r}: not a job state (one of {', '.join(_ALL_STATES)}, "
                    "or queued, running, finished)"
                )
        if all is None:
            all = any(s in FINISHED for s in states)
        shares, users = _strings(share), _strings(user)
        a = self.jobs_answer(all=all)
        out = []
        for v in a["running"] + a["queue"] + a["finished"]:
            if shares and v["share"] not in shares:
                continue
            if users and (v.get("submitter") or {}).get("name") not in users:
                continue
            if states and v["state"] not in states:
                continue
            if name is not None and name not in v["name"]:
                continue
            out.append(Job.from_view(v))
        return out

    def set_priority(self, id: int, priority: int) -> bool:
        """Change a job's priority (0..9999); ``False`` when it had already ended.
        Raises :class:`~shareq.NotAllowed` for another user's job (unless an admin),
        :class:`~shareq.NotFound`, :class:`~shareq.BadRequest` out of range."""
        a = self._call({"op": "priority", "id": int(id), "priority": int(priority)})
        return bool(a.get("changed"))

    def cancel(self, id: int) -> bool:
        """Cancel a job: ``True`` when it was cancelled now, ``False`` when it had already
        ended or was being cancelled. Raises :class:`~shareq.NotAllowed` for another
        user's job (unless an admin), :class:`~shareq.NotFound`."""
        a = self._call({"op": "cancel", "ids": [int(id)]})
        return any(o.get("cancelled") for o in a.get("cancelled") or [])

    def status(self) -> Dict[str, Any]:
        """The environment, its units and shares, lending, and the queue's size (the
        ``status`` answer, as ``shareq status --json`` shows it)."""
        return self._call({"op": "status"})["status"]

    def put_config(
        self,
        file: str,
        documents: Union[str, Sequence[Mapping[str, Any]]],
        dry_run: bool = False,
    ) -> Dict[str, Any]:
        """Create or replace one file of the scheduler's config directory, then reload
        (admins only; the counterpart of the AWS example's ``create_quota_share`` /
        ``update_quota_share``).

        ``file``: a plain ``*.yaml`` / ``*.yml`` name in the directory (e.g.
        ``"shares.yaml"``). ``documents``: YAML text, or a list of documents as dicts
        (see :func:`quota_share`), each written as one JSON document (JSON is YAML).
        The scheduler validates the directory with this file exactly as its watcher would;
        only a valid set is written (atomically, with the file's owner and mode) and
        reloaded. Returns the scheduler's verdict: ``{"path": ..., "written": True,
        "hash": ..., "summary": "3 shares; gpu 3/3 guaranteed ..."}``; with ``dry_run``,
        validated only (``"written": False``).

        Raises :class:`~shareq.Rejected` with every ``file:line:column: what is wrong``
        of an invalid config (nothing is changed), :class:`~shareq.NotAllowed` for a
        caller who is not an admin.
        """
        if isinstance(documents, str):
            text = documents
        else:
            docs = [json.dumps(dict(d), indent=2) for d in documents]
            if not docs:
                raise ValueError("documents is empty")
            text = "\n---\n".join(docs) + "\n"
        req = {"op": "put_config", "file": file, "text": text, "dryRun": bool(dry_run)}
        return self._call(req)["config"]

    def log(self, id: JobRef, attempt: Optional[int] = None, rank: int = 0) -> str:
        """A job's output log so far (of ``attempt``, default the latest), as text with
        invalid UTF-8 replaced. ``id``: a job id, or ``"P:I"`` for child I of array P (as
        ``shareq log`` takes it); ``rank``: a multi-node job's node (default 0, the
        first). The scheduler serves it to the job's owner and admins.
        Raises :class:`~shareq.NotFound` when the job has no log yet."""
        parts: List[str] = []
        offset = 0
        ref = _job_ref(id)
        while True:
            req: Dict[str, Any] = {"op": "log", "id": ref, "offset": offset}
            if attempt is not None:
                req["attempt"] = attempt
            if rank:
                req["rank"] = rank
            chunk = self._call(req)["log"]
            attempt = chunk["attempt"]
            parts.append(chunk["data"])
            if chunk["next"] <= offset:
                return "".join(parts)
            offset = chunk["next"]

    def events(
        self, follow: bool = True, since: When = None, after: Optional[int] = None
    ) -> Iterator[Dict[str, Any]]:
        """The scheduler's decisions, one dict per line, the same objects as
        ``shareq events --json`` prints (``event``, ``at``, ``job``, ``share``, ``user``,
        ..., and ``seq``): the stored ones from ``since`` (ms since the epoch, the API's
        unit, or a timezone-aware datetime; default: now with ``follow``, else a day back) or after sequence number
        ``after``, then with ``follow`` the live ones as they are made, until the
        generator is closed. A followed stream that the scheduler ends (it stopped or
        restarted) raises :class:`~shareq.NotRunning`, whose message gives the
        ``after=`` to resume from without missing or repeating a line."""
        now = time.time()
        if since is not None:
            since_ms = _ms(since)
        elif after is not None:
            since_ms = 0
        elif follow:
            since_ms = int(now * 1000)
        else:
            since_ms = int((now - 86400) * 1000)
        req = {"op": "events", "after": int(after or 0), "since": since_ms, "follow": follow}
        s = self._connect(self.timeout)
        try:
            s.settimeout(None if follow else self.timeout)
            s.sendall(json.dumps(req).encode() + b"\n")
            last = after or 0
            with s.makefile("rb") as reader:
                for line in reader:
                    v = json.loads(line)
                    if "line" not in v:
                        raise from_answer(v)
                    ev = json.loads(v["line"])
                    ev["seq"] = last = v["seq"]
                    yield ev
        except OSError as e:
            raise ProtocolError(f"reading the event stream of {self.socket_path}: {e}") from e
        finally:
            s.close()
        if follow:
            raise NotRunning(
                f"the scheduler on {self.state} closed the event stream (it stopped or "
                f"restarted); resume with events(after={last})"
            )
