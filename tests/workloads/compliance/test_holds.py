"""Legal holds name a subject by a salted digest only, and cover every identifier of the subject
the erasure finds (a hold placed on an address covers an erasure asked by entity id)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakehouse.errors import LegalHoldError, UsageError
from ledger import LegalHold
from workloads.compliance.holds import HoldRequest, holding, refuse_if_held
from workloads.compliance.scan import identifier_digest


def hold_on(key: str, hold_id: str = "LH-1", salt: str = "5a17") -> LegalHold:
    return LegalHold(
        hold_id=hold_id,
        action="placed",
        by="counsel",
        reason="case 14",
        salt=salt,
        subject_digest=identifier_digest(salt, key),
        at=datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_a_hold_on_an_address_covers_every_identifier_list_that_holds_it() -> None:
    holds = {"LH-1": hold_on("alice@example.org"), "LH-2": hold_on("ent-bob", "LH-2")}
    subject_found_by_entity = ["alice@example.org", "ord-7", "ent-alice-v1", "ent-alice-v3"]
    assert holding(holds, subject_found_by_entity) == holds["LH-1"]
    assert holding(holds, [" ALICE@example.org "]) == holds["LH-1"], "keyed as resolvers key addresses"
    assert holding(holds, ["ent-bob"]) == holds["LH-2"]
    assert holding(holds, ["malice@example.org", "ent-alice-v2"]) is None
    with pytest.raises(LegalHoldError, match=r"legal hold LH-1 .*nothing was erased") as refused:
        refuse_if_held(holds, subject_found_by_entity)
    assert refused.value.exit_code == 2


@pytest.mark.parametrize(
    ("hold_id", "by", "reason", "email", "message"),
    [
        ("", "counsel", "case", "a@b.org", "HOLD is missing"),
        ("LH-1", " ", "case", "a@b.org", "--by is missing"),
        ("LH-1", "counsel", "", "a@b.org", "--reason is missing"),
        ("LH-1", "counsel", "case", "nobody", "address"),
        ("LH-1", "counsel", "litigation re A@B.org.", "a@b.org", "--reason names the subject"),
        ("a@b.org", "counsel", "case", "a@b.org", "HOLD names the subject"),
    ],
)
def test_a_hold_request_is_refused_before_spark_naming_the_argument(
    hold_id: str, by: str, reason: str, email: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        HoldRequest(hold_id, by, reason, email)


def test_a_hold_on_an_empty_entity_is_refused() -> None:
    with pytest.raises(UsageError, match="--entity is empty"):
        HoldRequest("LH-1", "counsel", "case", entity="  ")
