"""Conservation: every Bronze row of a manifest is accounted for exactly once.

Per manifest, Bronze rows = Silver rows + duplicates + corrected + quarantined + held.
A mismatch raises :class:`~lakehouse.errors.ConservationError` before anything is
written. Pure: counts in, balances out.

``held`` counts the facts ``ops.exceptions`` still keeps out of Silver (awaiting approval
or rejected). An approved exception is counted once, where its fact went: among Silver's
rows (or ``corrected``, if a later revision of the event wins), no longer among the held;
its queue row stays only as the record of the decision
(:mod:`workloads.silver.exceptions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from lakehouse.errors import ConservationError, UsageError
from workloads.vocabulary import Fate

__all__ = ["ManifestBalance", "balance_manifests", "check_conservation"]


@dataclass(frozen=True)
class ManifestBalance:
    """Where the Bronze rows of one manifest went."""

    manifest_id: str
    feed: str
    bronze: int
    silver: int = 0
    duplicate: int = 0
    corrected: int = 0
    quarantined: int = 0
    held: int = 0
    """Facts kept out of Silver in ``ops.exceptions`` (awaiting approval or rejected)."""
    balanced: bool = field(init=False)
    """Every Bronze row found exactly once (derived from the counts)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "balanced", self.bronze == self.accounted)

    @property
    def accounted(self) -> int:
        """Rows found in some fate."""
        return self.silver + self.duplicate + self.corrected + self.quarantined + self.held


_BALANCE_FIELD: Final[Mapping[str, str]] = {
    Fate.SILVER: "silver",
    Fate.DUPLICATE: "duplicate",
    Fate.CORRECTED: "corrected",
    Fate.QUARANTINE: "quarantined",
    Fate.EXCEPTIONS: "held",
}


def balance_manifests(
    bronze: Mapping[str, tuple[str, int]], outcomes: Mapping[tuple[str, str], int]
) -> list[ManifestBalance]:
    """Per manifest: Bronze rows (``manifest -> (feed, rows)``) against the rows found in
    each fate (``(manifest, fate) -> rows``). A manifest seen only in outcomes has
    ``bronze=0`` (rows invented), one seen only in Bronze has nothing accounted (lost)."""
    per_manifest: dict[str, dict[str, int]] = {}
    for (manifest_id, fate), n in outcomes.items():
        if fate not in _BALANCE_FIELD:
            raise UsageError(f"unknown fate {fate!r}; known fates: {', '.join(Fate)}")
        counts = per_manifest.setdefault(manifest_id, dict.fromkeys(_BALANCE_FIELD.values(), 0))
        counts[_BALANCE_FIELD[fate]] += n
    balances = []
    for manifest_id in sorted({*bronze, *per_manifest}):
        feed, rows = bronze.get(manifest_id, ("?", 0))
        counts = per_manifest.get(manifest_id, {})
        balances.append(ManifestBalance(manifest_id=manifest_id, feed=feed, bronze=rows, **counts))
    return balances


def check_conservation(balances: Iterable[ManifestBalance]) -> None:
    """Raise :class:`ConservationError` naming the first manifest whose rows do not add up."""
    for b in balances:
        if not b.balanced:
            raise ConservationError(
                f"manifest {b.manifest_id} ({b.feed}): Bronze has {b.bronze} rows but Silver "
                f"accounts for {b.accounted} (silver {b.silver} + duplicate {b.duplicate} + "
                f"corrected {b.corrected} + quarantined {b.quarantined} + held {b.held}, approved "
                f"exceptions counted in silver or corrected); "
                f"nothing was written, report this as a bug in the Silver build"
            )
