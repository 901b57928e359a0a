"""The exceptions of the client, one per error ``code`` of the protocol (docs/API.md)."""

from __future__ import annotations

from typing import Any, Dict, Optional


class ShareqError(Exception):
    """An error answer of the scheduler (``ok: false``), or a failure to talk to it.

    ``code`` is the protocol's machine-readable code (``None`` for a failure of the
    connection itself), ``message`` the scheduler's words for people, ``answer`` the whole
    answer object when there was one.
    """

    code: Optional[str] = None

    def __init__(
        self,
        message: str,
        code: Optional[str] = None,
        answer: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.answer = answer or {}


class NotAllowed(ShareqError):
    """The rules refuse this caller this action (``not_allowed``); the message names the
    user, the action and the rule, e.g. ``bob may not submit to qs3: members are alice``."""

    code = "not_allowed"


class Rejected(ShareqError):
    """The scheduler refused the submission or the config (``rejected``); ``reason`` is why,
    e.g. ``QUOTA_MANAGEMENT_LIMIT_EXCEEDED: needs 4, qs1 may hold at most 2``."""

    code = "rejected"

    @property
    def reason(self) -> str:
        """Why the scheduler refused it (its own words)."""
        return self.message


class LimitExceeded(ShareqError):
    """A per-caller limit of the scheduler (``limit``): request size, connections, ...;
    the message names the limit."""

    code = "limit"


class NotFound(ShareqError):
    """No such job, or it has no log yet (``not_found``)."""

    code = "not_found"


class NotRunning(ShareqError):
    """No scheduler listens on the state directory's socket."""

    code = None


class ShuttingDown(NotRunning):
    """The scheduler is stopping and did not carry the request out (``shutting_down``)."""

    code = "shutting_down"


class BadRequest(ShareqError):
    """The scheduler could not read the request or an argument is out of range
    (``bad_request``)."""

    code = "bad_request"


class Unavailable(ShareqError):
    """The scheduler cannot answer this now (``unavailable``)."""

    code = "unavailable"


class UnsupportedApi(ShareqError):
    """The scheduler does not speak the API version this client speaks
    (``unsupported_api``)."""

    code = "unsupported_api"


class ProtocolError(ShareqError):
    """The connection broke, or the scheduler sent something that is not an answer."""

    code = None


_BY_CODE = {
    c.code: c
    for c in (
        NotAllowed,
        Rejected,
        LimitExceeded,
        NotFound,
        ShuttingDown,
        BadRequest,
        Unavailable,
        UnsupportedApi,
    )
}


def from_answer(answer: Dict[str, Any]) -> ShareqError:
    """The exception for an error answer, by its ``code`` (an unknown or absent code, as
    from a newer or an older scheduler, gives a plain :class:`ShareqError`)."""
    message = str(answer.get("error") or "the scheduler gave no reason")
    code = answer.get("code")
    # `notAllowed`, or `not_allowed` from a scheduler of an earlier release.
    if code is None and (answer.get("notAllowed") or answer.get("not_allowed")):
        code = "not_allowed"
    cls = _BY_CODE.get(code, ShareqError)
    return cls(message, code=code, answer=answer)
