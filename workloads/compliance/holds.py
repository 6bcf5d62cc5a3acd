"""Legal holds: a subject whose data must be kept (litigation, an investigation) cannot be
erased until the hold is released.

``lakehouse hold add HOLD --subject-email A | --entity ID --by WHO --reason TEXT`` places a
hold, ``lakehouse hold release HOLD --by WHO --reason TEXT`` releases it, ``lakehouse hold
list`` shows them. Each is one :class:`ledger.LegalHold` entry: the ledger holds no
identifier in clear, so the subject is kept as a salted digest of its key, and a hold is
checked by digesting the subject's identifiers with the hold's salt. An erasure checks the
key it was asked for before it reads anything, then every identifier the subject turned
out to have (a hold placed on an address also covers an erasure asked by entity id).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakehouse.errors import LegalHoldError, UsageError
from ledger import Ledger, LegalHold
from ledger.chain import LedgerRecord
from ledger.timeline import legal_holds
from workloads.compliance.scan import identifier_digest
from workloads.compliance.subject import email_key, refuse_text_naming

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HoldRequest:
    """What ``lakehouse hold add|release`` states; checked before Spark starts."""

    hold_id: str
    by: str
    reason: str
    email: str | None = None
    entity: str | None = None

    def __post_init__(self) -> None:
        fields = (("HOLD", self.hold_id), ("--by", self.by), ("--reason", self.reason))
        for flag, value in fields:
            if not value.strip():
                raise UsageError(f"{flag} is missing or empty")
        if self.entity is not None and not self.entity.strip():
            raise UsageError("--entity is empty")
        key = self.subject_key  # an email that is no address is refused here
        refuse_text_naming(fields, [key] if key else [])

    @property
    def subject_key(self) -> str | None:
        if self.email is not None:
            return email_key(self.email)
        return self.entity.strip() if self.entity is not None else None


def open_holds(ledger: Ledger) -> dict[str, LegalHold]:
    """Holds placed and not released, by id."""
    return placed_holds(ledger.reader.records(kind="legal_hold"))


def placed_holds(records: Iterable[LedgerRecord]) -> dict[str, LegalHold]:
    """Holds placed and not released, by id, from the ledger's records (read by Spark, or
    without a JVM before Spark starts)."""
    return {h: e for h, e in legal_holds(records).items() if e.action == "placed"}


def check_decision(action: str, request: HoldRequest, placed: Mapping[str, LegalHold]) -> LegalHold | None:
    """Refuse ``hold add`` of an id already placed and ``hold release`` of one that is not
    (exit 2); the hold a release releases."""
    if action == "add":
        if request.subject_key is None:
            raise UsageError("name the subject of the hold: --subject-email ADDRESS or --entity ID")
        if request.hold_id in placed:
            raise UsageError(
                f"hold {request.hold_id} is already placed; release it first or choose another id"
            )
        return None
    found = placed.get(request.hold_id)
    if found is None:
        raise UsageError(f"no placed hold {request.hold_id!r}; `lakehouse hold list` shows them")
    return found


def place_hold(ledger: Ledger, request: HoldRequest) -> LegalHold:
    """Record a hold on the subject ``request`` names; refuses an id that is already placed."""
    check_decision("add", request, open_holds(ledger))
    key = request.subject_key
    assert key is not None  # checked above
    salt = secrets.token_hex(16)
    hold = LegalHold(
        hold_id=request.hold_id,
        action="placed",
        by=request.by,
        reason=request.reason,
        salt=salt,
        subject_digest=identifier_digest(salt, key),
        at=ledger.writer.clock.now(),
    )
    ledger.writer.append(hold)
    log.info("legal hold %s placed by %s", request.hold_id, request.by)
    return hold


def release_hold(ledger: Ledger, request: HoldRequest) -> LegalHold:
    """Record the release of a placed hold (the subject is the one it was placed on)."""
    placed = check_decision("release", request, open_holds(ledger))
    assert placed is not None  # check_decision refuses a hold that is not placed
    released = placed.model_copy(
        update={
            "action": "released",
            "by": request.by,
            "reason": request.reason,
            "at": ledger.writer.clock.now(),
        }
    )
    ledger.writer.append(released)
    log.info("legal hold %s released by %s", request.hold_id, request.by)
    return released


def holding(holds: Mapping[str, LegalHold], identifiers: Iterable[str]) -> LegalHold | None:
    """The first open hold whose subject is one of ``identifiers`` (keys: addresses as
    resolvers key them, entity ids), or None."""
    keys = list(identifiers)
    for hold in holds.values():
        if any(identifier_digest(hold.salt, key) == hold.subject_digest for key in keys):
            return hold
    return None


def refuse_if_held(holds: Mapping[str, LegalHold], identifiers: Iterable[str]) -> None:
    """Raise :class:`LegalHoldError` (exit 2) naming the hold that covers the subject."""
    hold = holding(holds, identifiers)
    if hold is not None:
        raise LegalHoldError(
            f"the subject is under legal hold {hold.hold_id} (placed by {hold.by} at {hold.at.isoformat()}: "
            f"{hold.reason}); nothing was erased. Release it first: lakehouse hold release {hold.hold_id}"
        )
