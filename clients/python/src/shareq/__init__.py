"""A Python client of the shareq scheduler: submit, watch and manage jobs through its
control socket ``<state>/shareq.sock`` (the protocol is docs/API.md of the shareq
repository). Pure standard library.

>>> import shareq
>>> c = shareq.Client()                      # doctest: +SKIP
>>> job = c.submit(share="vision", command=["python", "train.py"], gpus=2)  # doctest: +SKIP
>>> c.wait(job.id, timeout=600).state        # doctest: +SKIP
'SUCCEEDED'
"""

from .client import API_VERSION, SYSTEM_STATE, Client, Job, default_state_dir, quota_share
from .errors import (
    BadRequest,
    LimitExceeded,
    NotAllowed,
    NotFound,
    NotRunning,
    ProtocolError,
    Rejected,
    ShareqError,
    ShuttingDown,
    Unavailable,
    UnsupportedApi,
)
from .job import checkpoint

__all__ = [
    "API_VERSION",
    "BadRequest",
    "Client",
    "Job",
    "LimitExceeded",
    "NotAllowed",
    "NotFound",
    "NotRunning",
    "ProtocolError",
    "Rejected",
    "ShareqError",
    "SYSTEM_STATE",
    "ShuttingDown",
    "Unavailable",
    "UnsupportedApi",
    "checkpoint",
    "default_state_dir",
    "quota_share",
]
