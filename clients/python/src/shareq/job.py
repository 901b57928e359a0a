"""What a job's own processes may tell the scheduler about their attempt (SPEC §14):
:func:`checkpoint`, from the environment every attempt gets (``SHAREQ_JOB_ID``,
``SHAREQ_ATTEMPT``, ``SHAREQ_ATTEMPT_TOKEN``, ``SHAREQ_SOCKET``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

from .client import Client, default_state_dir
from .errors import BadRequest, ShareqError

#: The longest note a checkpoint report may carry, in bytes (UTF-8).
NOTE_MAX = 200


def checkpoint(
    note: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = 60.0,
) -> Dict[str, Any]:
    """Inside a job: tell the scheduler that this attempt has saved its work, as
    ``shareq checkpoint --note NOTE`` does. ``note`` (at most 200 bytes) says what was
    saved; the next attempt finds it in ``SHAREQ_LAST_CHECKPOINT_NOTE``. Returns the
    report as stored: ``{"at": ms, "attempt": n, "note": ...}``.

    Raises :class:`ShareqError` outside a job, :class:`BadRequest` for a longer note,
    :class:`NotAllowed` when the caller is not a process of the attempt (another user,
    another job), :class:`Rejected` when the attempt no longer runs.

    >>> import shareq
    >>> shareq.checkpoint(note="epoch 7")   # doctest: +SKIP
    {'at': 1796140000000, 'attempt': 1, 'note': 'epoch 7'}
    """
    env = os.environ if env is None else env

    def number(name: str) -> int:
        v = env.get(name)
        if not v:
            raise ShareqError(
                f"{name} is not set: shareq.checkpoint() runs inside a job of shareq"
            )
        try:
            return int(v)
        except ValueError:
            raise ShareqError(f"{name} is {v!r}, not a number") from None

    request: Dict[str, Any] = {
        "op": "checkpoint",
        "job": number("SHAREQ_JOB_ID"),
        "attempt": number("SHAREQ_ATTEMPT"),
    }
    if note is not None:
        size = len(note.encode())
        if size > NOTE_MAX:
            raise BadRequest(
                f"--note: a checkpoint note may hold at most {NOTE_MAX} bytes; "
                f"this one has {size}",
                code="bad_request",
            )
        request["note"] = note
    token = env.get("SHAREQ_ATTEMPT_TOKEN")
    if token:
        request["token"] = token
    socket_path = env.get("SHAREQ_SOCKET")
    state = os.path.dirname(socket_path) if socket_path else default_state_dir(env)
    answer = Client(state, timeout=timeout)._call(request)
    stored = answer.get("checkpoint")
    if not isinstance(stored, dict):
        raise ShareqError("the scheduler sent no checkpoint in its answer")
    return stored
