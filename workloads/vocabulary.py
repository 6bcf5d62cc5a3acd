"""The words the workloads share, each defined once: feeds, fates, lateness classes,
correlation statuses, replay verdicts and the logical table names.

Every value is a ``StrEnum`` member, so it compares equal to (and is stored as) its plain
string: Spark columns, ledger entries and YAML files keep the same text they always had.
The ledger's own table (``ops.ledger``) is named in :mod:`ledger`, which sits below this
layer.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Feed(StrEnum):
    """A partner feed: one Bronze table each, delivered as dated files."""

    ORDERS = "orders"
    REFUNDS = "refunds"
    LOGINS = "logins"
    SETTLEMENTS = "settlements"
    OUTCOMES = "outcomes"

    @property
    def bronze_table(self) -> TableName:
        """The Bronze table this feed lands in."""
        return TableName(f"bronze.{self.value}")


FEEDS: Final[tuple[Feed, ...]] = tuple(Feed)
"""Every feed, in the order the deliveries of one date are written and ingested."""

CSV_FEEDS: Final[frozenset[Feed]] = frozenset({Feed.SETTLEMENTS})
"""Feeds delivered as CSV with a header row; all others are JSON lines."""


class OutcomeLabel(StrEnum):
    """A confirmed outcome of an order, as the ``outcomes`` feed delivers it (Silver ``label``)."""

    FRAUD = "fraud"
    CHARGEBACK = "chargeback"


class Fate(StrEnum):
    """Where one Bronze line ends up; every line has exactly one (conservation)."""

    SILVER = "silver"
    DUPLICATE = "duplicate"
    CORRECTED = "corrected"
    QUARANTINE = "quarantine"
    EXCEPTIONS = "exceptions"


class QuarantineReason(StrEnum):
    """Why a line was quarantined instead of entering Silver."""

    MALFORMED = "malformed"
    WRONG_TYPE = "wrong_type"
    MISSING_EVENT_ID = "missing_event_id"
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"


class Lateness(StrEnum):
    """How late a fact arrived, as Silver stores it (``hold`` is never stored in Silver)."""

    ON_TIME = "on_time"
    LATE = "late"
    REOPEN = "reopen"
    ADJUSTMENT = "adjustment"
    HOLD = "hold"


class ClosedPeriodAction(StrEnum):
    """What a feed's policy does with a late fact for a closed period (``policies.yaml``)."""

    REOPEN = "reopen"
    ADJUST = "adjust"
    HOLD = "hold"

    @property
    def lateness(self) -> Lateness:
        """The lateness class a fact handled by this action is stored with."""
        return _ACTION_LATENESS[self]


_ACTION_LATENESS: Final[dict[ClosedPeriodAction, Lateness]] = {
    ClosedPeriodAction.REOPEN: Lateness.REOPEN,
    ClosedPeriodAction.ADJUST: Lateness.ADJUSTMENT,
    ClosedPeriodAction.HOLD: Lateness.HOLD,
}


class ExceptionStatus(StrEnum):
    """Where a held fact in ``ops.exceptions`` stands: waiting, or decided by a named person
    (``lakehouse exceptions approve|reject``). An approved fact enters Silver as an
    adjustment; a rejected one stays out, with its reason."""

    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    REJECTED = "rejected"


class CorrelationStatus(StrEnum):
    """The life of one correlation row version (seed 001: superseded, never deleted)."""

    PROVISIONAL = "provisional"
    AUTHORITATIVE = "authoritative"
    SUPERSEDED = "superseded"
    RETRACTED = "retracted"


INACTIVE_STATUSES: Final[tuple[CorrelationStatus, ...]] = (
    CorrelationStatus.SUPERSEDED,
    CorrelationStatus.RETRACTED,
)
"""Statuses of row versions that no longer serve."""

CURRENT_STATUSES: Final[tuple[CorrelationStatus, ...]] = (
    CorrelationStatus.PROVISIONAL,
    CorrelationStatus.AUTHORITATIVE,
)
"""Statuses of the row version that serves (at most one per ``correlation_id``)."""


class StreamOutcome(StrEnum):
    """How the batch build judged one streaming (provisional) correlation (seed 004, 12.4).

    The pair (type, entity_a, entity_b) is what is compared: the stream saw a bounded window
    of partial evidence, so its ``valid_from`` (and so its id) may differ from the batch's."""

    AGREE = "agree"
    """Batch finds the pair with the same confidence: the provisional row is promoted."""
    BATCH_STRONGER = "batch_stronger"
    """Batch finds the pair on its complete evidence with another confidence: it supersedes."""
    FALSE_POSITIVE = "false_positive"
    """Batch does not find the pair: the provisional row is retracted and consumers told."""
    MISSED = "missed"
    """Batch finds a pair in the window the stream covered that the stream did not: the
    batch row is inserted into the provisional view and the recall gap logged."""


class Verdict(StrEnum):
    """What a replay's reconciliation decides (seed 000)."""

    PUBLISH = "publish"
    INVESTIGATE = "investigate"
    REPAIR = "repair"
    SUPPRESS = "suppress"
    ROLLBACK = "rollback"


class ChangeKind(StrEnum):
    """Where in the chain a replay's engine change sits (``workloads.replay.identity``)."""

    RESOLVER = "resolver"
    """Upstream of the answer's producer (entity resolution): the producer re-runs on the new
    entities."""
    PRODUCER = "producer"
    """The engine that writes the answer table itself (correlation): it re-runs on the entities
    of the resolver in force."""


class QualityBasis(StrEnum):
    """What a version's quality report was measured against (``workloads.evaluation``)."""

    GROUND_TRUTH = "ground_truth"
    """A labelled truth file: the true person of every identity, the true shared-asset groups."""
    NONE = "none"
    """No labels for this data: the report says so (confirmed outcomes come with the ML work)."""


class ProtectionReason(StrEnum):
    """Why a table version must survive routine maintenance (``workloads.maintenance``)."""

    PINNED = "pinned"
    """An input of a replay that can still resume."""
    PUBLISHED = "published"
    """A version a publication made current: its rollback window and the audit window."""
    ROLLBACK_TARGET = "rollback-target"
    """The version before a live publication: what its rollback returns to."""
    SERVED = "served"
    """A version readers were served (a build or a rollback) within the audit window."""


class Difference(StrEnum):
    """How a key differs between a source and the store derived from it (seed 002)."""

    MISSING = "missing"
    """In the source, not in the derived store: a lost or unprocessed change; repaired by writing it."""
    DIVERGENT = "divergent"
    """In both, with different values: a projection bug, an out-of-order or a second writer."""
    ORPHAN = "orphan"
    """Only in the derived store: an unpropagated delete, or data that exists nowhere else;
    reported, never deleted."""


class TableName(StrEnum):
    """Every logical table the workloads read or write (configured in ``lakehouse.yaml``)."""

    BRONZE_ORDERS = "bronze.orders"
    BRONZE_REFUNDS = "bronze.refunds"
    BRONZE_LOGINS = "bronze.logins"
    BRONZE_SETTLEMENTS = "bronze.settlements"
    BRONZE_OUTCOMES = "bronze.outcomes"
    SILVER_EVENTS = "silver.events"
    ENTITY_DAILY = "gold.entity_daily"
    BASELINES = "gold.baselines"
    CORRELATIONS = "gold.correlations"
    CORRELATIONS_BY_ENTITY = "gold.correlations_by_entity"
    PROVISIONAL_CORRELATIONS = "gold.provisional_correlations"
    TRAINING_SETS = "gold.training_sets"
    FRAUD_SCORES = "gold.fraud_scores"
    COMMUNITIES = "gold.communities"
    CALIBRATION_REPORTS = "gold.calibration_reports"
    MANIFESTS = "ops.manifests"
    QUARANTINE = "ops.quarantine"
    EXCEPTIONS = "ops.exceptions"
    OUTBOX = "ops.outbox"
    ACKS = "ops.acks"
    STREAM_BATCHES = "ops.stream_batches"
    STREAM_DIVERGENCE = "ops.stream_divergence"
    RECONCILE_REPORTS = "ops.reconcile_reports"


BRONZE_TABLES: Final[tuple[TableName, ...]] = tuple(feed.bronze_table for feed in FEEDS)
"""One Bronze table per feed, in feed order."""


REDACTED_PREFIX: Final = "redacted:"
"""What replaces an erased subject's identifier where the fact around it is kept (a Gold
correlation's side, its evidence; a review file's sample): ``redacted:<certificate id>``."""


def redacted_as(certificate_id: str) -> str:
    """The value that stands for an erased subject under one erasure certificate."""
    return f"{REDACTED_PREFIX}{certificate_id}"


PSEUDONYM_PREFIX: Final = "ps-"
"""What an identifier becomes in an audit extract (``lakehouse extract``): ``ps-`` and 24 hex
of its sha256 under the extract's own salt, which is drawn for the extract and kept nowhere."""
