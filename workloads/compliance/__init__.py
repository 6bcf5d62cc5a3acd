"""W6 compliance: erase a data subject everywhere, prove it independently, certify it."""

from workloads.compliance.erasure import (
    ErasureIncomplete,
    ErasureRequest,
    ErasureResult,
    Places,
    TablePlace,
    erase,
    find_certificate,
    reverify,
)
from workloads.compliance.holds import HoldRequest, open_holds, place_hold, release_hold
from workloads.compliance.subject import Subject, find_subject

__all__ = [
    "ErasureIncomplete",
    "ErasureRequest",
    "ErasureResult",
    "HoldRequest",
    "Places",
    "Subject",
    "TablePlace",
    "erase",
    "find_certificate",
    "find_subject",
    "open_holds",
    "place_hold",
    "release_hold",
    "reverify",
]
