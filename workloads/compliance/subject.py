"""Who a data subject is in the lakehouse, and which rows of each table are theirs.

A request names a subject by an email address or by an entity id. :func:`find_subject`
turns it into every identifier that belongs to the subject in the whole retained history:

* **email keys**: the address as every resolver keys it (``strip().lower()``); from an
  entity id, every address that entity held in any retained Silver version;
* **order ids**: the subject's orders (events without an email, such as settlements and
  outcomes, belong to the subject of their order);
* **entity ids under every engine version**: the ids in every retained Silver version and
  the id each known resolver version gives the subject's addresses today. An address maps
  to different entities under ER v1 and v2, and Gold keeps superseded correlation rows of
  old versions after their Silver snapshots are gone, so the current version is not enough.

:data:`RULES` says, per table, which rows are the subject's, as a SQL condition over a
table row ``t`` and the one key row ``s`` (:func:`key_row`: arrays of the identifiers).
Raw text (Bronze lines, quarantined lines, held records, notification payloads) is matched
token by token, so ``alice@x.com`` never matches ``malice@x.com``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.errors import UsageError
from lakehouse.frames import union_all
from lakehouse.identifiers import IDENTIFIER_SEPARATORS
from lakehouse.tables import TableRegistry
from workloads.compliance.scan import tokens
from workloads.vocabulary import BRONZE_TABLES, REDACTED_PREFIX, TableName

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)


def _tokens_of(text: str) -> str:
    """SQL: the tokens of a text column of ``t`` (:func:`lakehouse.identifiers.identifier_tokens`:
    the cut the ingest filter and the independent scan make too)."""
    parts = f"split(lower(t.`{text}`), '{IDENTIFIER_SEPARATORS}')"
    return f"filter(transform({parts}, x -> regexp_replace(x, '^\\\\.+|\\\\.+$', '')), x -> x != '')"


_OWN_EVENT: Final = (
    "array_contains(s.emails, lower(trim(t.customer_email))) "
    "OR array_contains(s.orders, t.order_id) "
    "OR (t.domain = 'orders' AND array_contains(s.orders, t.event_id))"
)
_OWN_ENTITY: Final = "array_contains(s.entities, t.entity_id)"
_EITHER_SIDE: Final = "array_contains(s.entities, t.entity_a) OR array_contains(s.entities, t.entity_b)"

RULES: Final[Mapping[str, str]] = {
    **{table: f"arrays_overlap({_tokens_of('_raw')}, s.tokens)" for table in BRONZE_TABLES},
    TableName.SILVER_EVENTS: _OWN_EVENT,
    TableName.ENTITY_DAILY: _OWN_ENTITY,
    TableName.BASELINES: _OWN_ENTITY,
    TableName.CORRELATIONS: _EITHER_SIDE,
    TableName.CORRELATIONS_BY_ENTITY: f"{_OWN_ENTITY} OR {_EITHER_SIDE}",
    TableName.PROVISIONAL_CORRELATIONS: _EITHER_SIDE,
    TableName.QUARANTINE: f"arrays_overlap({_tokens_of('_raw')}, s.tokens)",
    TableName.EXCEPTIONS: f"arrays_overlap({_tokens_of('record')}, s.tokens)",
    TableName.OUTBOX: f"arrays_overlap({_tokens_of('payload')}, s.tokens)",
    TableName.TRAINING_SETS: f"{_OWN_ENTITY} OR array_contains(s.orders, t.decision_id)",
    TableName.FRAUD_SCORES: f"{_OWN_ENTITY} OR array_contains(s.orders, t.decision_id)",
}
"""Which rows of a table are the subject's: a condition over ``t`` (the row) and ``s`` (the key
row). Tables not listed hold nothing about a subject (manifests, acknowledgements) or must
never hold it (the ledger: the erasure checks it like every other file)."""


def _replaced(column: str) -> str:
    return f"CASE WHEN array_contains(s.entities, t.{column}) THEN s.replacement ELSE t.{column} END"


def _unlinked(column: str) -> str:
    return f"CASE WHEN t.{column} IS NULL THEN NULL ELSE sha2(concat(t.{column}, s.secret), 256) END"


_CORRELATION_SIDES: Final = {
    "entity_a": _replaced("entity_a"),
    "entity_b": _replaced("entity_b"),
    "evidence": "s.replacement",
    "correlation_id": _unlinked("correlation_id"),
    "superseded_by": _unlinked("superseded_by"),
}

REDACTIONS: Final[Mapping[str, Mapping[str, str]]] = {
    TableName.CORRELATIONS: _CORRELATION_SIDES,
    TableName.CORRELATIONS_BY_ENTITY: {"entity_id": _replaced("entity_id"), **_CORRELATION_SIDES},
    TableName.PROVISIONAL_CORRELATIONS: _CORRELATION_SIDES,
}
"""Tables whose matching rows are redacted instead of deleted: column -> its new value (SQL over
``t`` and ``s``). A Gold correlation is a fact about two entities; erasing one of them keeps the
fact for the other (and for counts over time) with the subject's side and the evidence replaced
by ``redacted:<certificate>`` (:func:`workloads.vocabulary.redacted_as`); the provisional
view (``gold.provisional_correlations``) is redacted alike. The correlation id
(and a successor's, ``superseded_by``) is a digest of the two entity ids anyone who knows the
subject's address could recompute, so it is re-keyed with a secret drawn for the erasure and
never stored (``s.secret``): the same mapping in the store and its index, so supersession
chains stay linked, and no way back. Every other table's matching rows are deleted."""


@dataclass(frozen=True)
class Subject:
    """Every identifier of one data subject found in the retained history (never logged)."""

    emails: tuple[str, ...]
    orders: tuple[str, ...]
    entities: tuple[str, ...]

    @property
    def identifiers(self) -> tuple[str, ...]:
        """Everything that must be found nowhere after the erasure."""
        return tuple(sorted({*self.emails, *self.orders, *self.entities}))

    def counts(self) -> dict[str, int]:
        """How many identifiers of each kind (what the ledger may record: no values)."""
        return {"emails": len(self.emails), "orders": len(self.orders), "entities": len(self.entities)}

    @property
    def empty(self) -> bool:
        return not self.identifiers


EMAIL_MAX_CHARS: Final = 254
"""RFC 5321's limit on a path's address; the local part's is :data:`EMAIL_LOCAL_MAX_CHARS`."""
EMAIL_LOCAL_MAX_CHARS: Final = 64

_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9._%+@\-]+")
"""The characters of one identifier token (:data:`lakehouse.identifiers.IDENTIFIER_SEPARATORS`
cuts at every other one), in either case: an address made of them is one whole token in raw
text and in the independent scan."""

ENTITY_ID: Final = re.compile(r"e1-[0-9a-f]{16}")
"""An entity id as every resolver version writes it: ``e1-`` and 16 lower-case hex
(:mod:`workloads.engines.entity_resolution`; v2 and v3 reuse the smallest v1 id)."""

TEXT_MAX_CHARS: Final[Mapping[str, int]] = {"--request": 128, "--reason": 1000}
"""The longest request id and reason an erasure keeps (ledger entry, tables' commit history)."""


def email_problem(address: str) -> str | None:
    """Why ``address`` (already stripped) is not an address the lakehouse can erase, or None.

    Pure: no normalisation beyond what resolvers do (``strip().lower()``). No NFKC: a fullwidth
    ``＠`` or a Cyrillic ``а`` is never mapped onto an ASCII address, which would be someone
    else's. Such an address is refused instead (see :data:`_TOKEN_CHARS`): raw text is cut into
    ASCII tokens, so neither the erasure's match in Bronze lines nor the independent scan could
    see it whole, and a certificate for it would not mean what it says.
    """
    if not address:
        return "it is empty"
    if len(address) > EMAIL_MAX_CHARS:
        return f"it is {len(address)} characters long; an address has at most {EMAIL_MAX_CHARS} (RFC 5321)"
    if not _TOKEN_CHARS.fullmatch(address):
        return (
            "it holds a character other than ASCII letters, digits and . _ % + - @ "
            "(whitespace, control, zero-width, quotes or non-ASCII look-alikes)"
        )
    if address.count("@") != 1:
        return "an address has exactly one '@'"
    local, domain = address.split("@")
    if not local or not domain:
        return "an address has a local part and a domain around its '@'"
    if len(local) > EMAIL_LOCAL_MAX_CHARS:
        return f"its local part is longer than {EMAIL_LOCAL_MAX_CHARS} characters (RFC 5321)"
    if address.startswith(".") or address.endswith("."):
        return "it starts or ends with '.'"
    return None


def email_key(address: str, flag: str = "--subject-email") -> str:
    """The key every resolver version uses for an address (``strip().lower()``); refuses (exit 2,
    naming ``flag``, without echoing the value) what :func:`email_problem` finds."""
    key = address.strip()
    problem = "it is empty" if not key else email_problem(key)
    if problem:
        raise UsageError(f"{flag} is not an email address the lakehouse can erase: {problem}")
    return key.lower()


def check_entity(entity: str, flag: str = "--entity") -> str:
    """An entity id exactly as the resolvers write it (:data:`ENTITY_ID`), or refused (exit 2)."""
    if not entity.strip():
        raise UsageError(f"{flag} is empty")
    if entity.startswith(REDACTED_PREFIX):
        raise UsageError(f"{flag} is a redacted value: that subject was erased already")
    if not ENTITY_ID.fullmatch(entity):
        raise UsageError(f"{flag} is not an entity id: ids are 'e1-' and 16 lower-case hex digits")
    return entity


def check_text(flag: str, text: str) -> str:
    """A request id or reason kept for good: not empty, one printable line (no control, zero-width
    or bidi characters), at most :data:`TEXT_MAX_CHARS`; quotes, ``%``, ``_`` and SQL are data."""
    if not text.strip():
        raise UsageError(f"{flag} is missing or empty")
    limit = TEXT_MAX_CHARS[flag]
    if len(text) > limit:
        raise UsageError(f"{flag} is {len(text)} characters long; at most {limit}")
    if not text.isprintable():
        raise UsageError(f"{flag} holds a control, zero-width or other unprintable character")
    return text


def refuse_text_naming(fields: Iterable[tuple[str, str]], identifiers: Iterable[str]) -> None:
    """Refuse (exit 2) free text that names the subject: ``fields`` are (flag, text) pairs bound
    for the ledger or a table's commit history, which keep them for good (and an erasure's
    verification would then fail forever)."""
    named = {i.strip().lower() for i in identifiers}
    for flag, text in fields:
        if tokens(text) & named:
            raise UsageError(
                f"{flag} names the subject; the ledger keeps it for good: say it without the subject"
            )


def key_row(spark: SparkSession, subject: Subject, replacement: str = "") -> DataFrame:
    """The one row :data:`RULES` and :data:`REDACTIONS` join with: the identifiers as arrays
    (``tokens`` lower-cased, as raw text is cut), what a redacted value becomes
    (``replacement``) and a fresh secret that re-keys redacted ids (never stored), bound as data."""
    import secrets

    schema = (
        "emails array<string>, orders array<string>, entities array<string>, tokens array<string>, "
        "replacement string, secret string"
    )
    row = (
        list(subject.emails),
        list(subject.orders),
        list(subject.entities),
        sorted({i.lower() for i in subject.identifiers}),
        replacement,
        secrets.token_hex(32),
    )
    return spark.createDataFrame([row], schema)


def find_subject(registry: TableRegistry, *, email: str | None = None, entity: str | None = None) -> Subject:
    """Every identifier of the subject named by an address or an entity id (see the module)."""
    from pyspark.sql import functions as F

    if (email is None) == (entity is None):
        raise UsageError("name the subject with exactly one of --subject-email and --entity")
    silver = _every_silver_version(registry)
    if silver is None:
        keys = {email_key(email)} if email else set()
        return Subject(tuple(sorted(keys)), (), tuple(sorted({entity} if entity else set())))
    key = F.lower(F.trim(F.col("customer_email")))
    emails = (
        {email_key(email)} if email else set(_values(silver.where(F.col("entity_id") == F.lit(entity)), key))
    )
    orders = set(
        _values(silver.where((F.col("domain") == "orders") & key.isin(sorted(emails))), F.col("event_id"))
    )
    own = (
        key.isin(sorted(emails))
        | F.col("order_id").isin(sorted(orders))
        | F.col("event_id").isin(sorted(orders))
    )
    entities = set(_values(silver.where(own), F.col("entity_id")))
    entities |= _entities_under_every_resolver(silver, emails)
    if entity:
        entities.add(entity)
    subject = Subject(tuple(sorted(emails)), tuple(sorted(orders)), tuple(sorted(entities)))
    log.info("subject found: %s", subject.counts())
    return subject


def addresses_of(registry: TableRegistry, entities: Sequence[str]) -> set[str]:
    """Every address (as resolvers key it) any retained Silver version gives one of ``entities``:
    an entity of a resolver that merges addresses holds other people's keys too."""
    from pyspark.sql import functions as F

    silver = _every_silver_version(registry)
    if silver is None or not entities:
        return set()
    return set(
        _values(
            silver.where(F.col("entity_id").isin(list(entities))), F.lower(F.trim(F.col("customer_email")))
        )
    )


def _every_silver_version(registry: TableRegistry) -> DataFrame | None:
    """Silver's rows in every retained version and open candidate (the columns that identify)."""
    table = registry.get(TableName.SILVER_EVENTS)
    if not table.exists() or table.current_version() is None:
        return None
    columns = ["domain", "event_id", "customer_email", "card_fingerprint", "order_id", "entity_id"]
    frames = [table.read(v).select(*columns) for v in table.retained_versions()]
    frames += [
        table.read_candidate(table.open_candidate(n, None)).select(*columns) for n in table.list_candidates()
    ]
    return union_all(frames).distinct().localCheckpoint()


def _entities_under_every_resolver(silver: DataFrame, emails: set[str]) -> set[str]:
    """The id each known resolver version gives the subject's addresses, over today's identities."""
    from pyspark.sql import functions as F

    from workloads.engines.entity_resolution import known_versions, resolver_for
    from workloads.replay.scope import identities, identity_rows

    if not emails:
        return set()
    rows = identity_rows(identities(silver.drop("entity_id").distinct())).localCheckpoint()
    found: set[str] = set()
    for version in known_versions():
        resolved = resolver_for(version)(rows)
        found |= set(
            _values(
                resolved.where(F.lower(F.trim("customer_email")).isin(sorted(emails))), F.col("entity_id")
            )
        )
    return found


def _values(df: DataFrame, column: Column) -> list[str]:
    return [str(r[0]) for r in df.select(column.alias("v")).where("v IS NOT NULL").distinct().collect()]


def tables_with_rules(registry: TableRegistry) -> Sequence[str]:
    """The configured tables :data:`RULES` covers, in configuration order."""
    return [name for name in registry.names() if name in RULES]
