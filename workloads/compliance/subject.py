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

**Shared keys** (:func:`split_entities`). A resolver version may give one entity id to the
subject and to other persons (ER v2 merges fraud-ring members who share a card). Such an id
is either

* **the subject's own** (it derives from the subject's own keys: the id a resolver gives the
  subject's identities resolved alone, e.g. ER v2 names a merged ring after its smallest v1
  id, which may be the subject's): it is an identifier of the subject, and in the other
  persons' rows that remain it is **re-keyed** (:func:`rekeyed_id`: the same new id in every
  table, from a secret of the request that is never stored with the data); or
* **borrowed** (it derives from another person's keys: that person's own id, which named the
  merged entity): it is that person's identifier, not the subject's. The subject's rows under
  it go; the id stays in the other persons' rows, and the scan does not look for it (a
  rebuild would derive it again from that person's data).

:data:`TREATMENTS` says, per table, which rows an erasure touches, which of them it deletes
and what it writes into the others (re-keyed ids, redacted correlation sides).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.errors import UsageError
from lakehouse.frames import union_all
from lakehouse.identifiers import IDENTIFIER_SEPARATORS
from lakehouse.tables import Table, TableRegistry
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
_OWN_OR_SHARED_ENTITY: Final = f"{_OWN_ENTITY} OR map_contains_key(s.rekeys, t.entity_id)"
"""An aggregate over an entity the subject shares sums the subject's events with the others':
deleted (the next Gold build recomputes it from the others' events), not re-keyed."""
_EITHER_SIDE: Final = "array_contains(s.entities, t.entity_a) OR array_contains(s.entities, t.entity_b)"

RULES: Final[Mapping[str, str]] = {
    **{table: f"arrays_overlap({_tokens_of('_raw')}, s.tokens)" for table in BRONZE_TABLES},
    TableName.SILVER_EVENTS: _OWN_EVENT,
    TableName.ENTITY_DAILY: _OWN_OR_SHARED_ENTITY,
    TableName.BASELINES: _OWN_OR_SHARED_ENTITY,
    TableName.CORRELATIONS: _EITHER_SIDE,
    TableName.CORRELATIONS_BY_ENTITY: f"{_OWN_ENTITY} OR {_EITHER_SIDE}",
    TableName.PROVISIONAL_CORRELATIONS: _EITHER_SIDE,
    TableName.QUARANTINE: f"arrays_overlap({_tokens_of('_raw')}, s.tokens)",
    TableName.EXCEPTIONS: f"arrays_overlap({_tokens_of('record')}, s.tokens)",
    TableName.OUTBOX: f"arrays_overlap({_tokens_of('payload')}, s.tokens)",
    TableName.TRAINING_SETS: f"{_OWN_ENTITY} OR array_contains(s.orders, t.decision_id)",
    TableName.FRAUD_SCORES: f"{_OWN_ENTITY} OR array_contains(s.orders, t.decision_id)",
    TableName.COMMUNITIES: _OWN_ENTITY,
}
"""Which rows of a table are the subject's: a condition over ``t`` (the row) and ``s`` (the key
row). Tables not listed hold nothing about a subject (manifests, acknowledgements) or must
never hold it (the ledger: the erasure checks it like every other file)."""


ENTITY_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    TableName.SILVER_EVENTS: ("entity_id",),
    TableName.CORRELATIONS: ("entity_a", "entity_b"),
    TableName.CORRELATIONS_BY_ENTITY: ("entity_id", "entity_a", "entity_b"),
    TableName.PROVISIONAL_CORRELATIONS: ("entity_a", "entity_b"),
    TableName.TRAINING_SETS: ("entity_id",),
    TableName.FRAUD_SCORES: ("entity_id",),
    TableName.COMMUNITIES: ("entity_id",),
}
"""The entity-id columns of each table whose rows are one event, one pair or one decision: a
shared id of the subject is re-keyed in them in the rows that remain (:data:`TREATMENTS`).
Daily rows and baselines are not listed: a row of a shared entity sums the subject's events
with the others' and is deleted (:data:`RULES`)."""


def rekeyed(column: str) -> str:
    """SQL: ``t.column`` with a re-keyed id replaced by its new id (``s.rekeys``: old -> new)."""
    return f"coalesce(try_element_at(s.rekeys, t.{column}), t.{column})"


def holds_rekeyed(columns: Sequence[str]) -> str:
    """SQL: one of ``columns`` of ``t`` holds a re-keyed id (false when there are none)."""
    return " OR ".join(f"map_contains_key(s.rekeys, t.{c})" for c in columns) or "false"


def _replaced(column: str) -> str:
    return f"CASE WHEN array_contains(s.entities, t.{column}) THEN s.replacement ELSE {rekeyed(column)} END"


def _unlinked(column: str) -> str:
    """SQL: ``t.column`` re-keyed (:func:`unlinked_id`) if it is one of the subject's correlation ids."""
    new = f"sha2(concat(t.{column}, s.secret), 256)"
    return f"CASE WHEN array_contains(s.correlations, t.{column}) THEN {new} ELSE t.{column} END"


_SUCCEEDS_THE_SUBJECTS: Final = "array_contains(s.correlations, t.superseded_by)"
"""Another pair's row superseded by one of the subject's: its link is re-keyed with the rest."""


_CORRELATION_SIDES: Final = {
    "entity_a": _replaced("entity_a"),
    "entity_b": _replaced("entity_b"),
    "evidence": f"CASE WHEN {_EITHER_SIDE} THEN s.replacement ELSE t.evidence END",
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
view (``gold.provisional_correlations``) is redacted alike. A side that is a shared id of the
subject (:func:`split_entities`) is re-keyed instead, and the evidence kept: the correlation is
the other persons'. The correlation id (and a successor's, ``superseded_by``) is a digest of
the two entity ids anyone who knows the subject's address could recompute, so each of the
subject's correlation ids (:attr:`Subject.correlations`) is re-keyed with the request's secret,
never stored with the data (``s.secret``, :func:`unlinked_id`) wherever it is: as a row's id, as
the ``superseded_by`` of another pair's row, in the store, its index, the provisional view and
the review files. The same mapping everywhere, so supersession chains and reviews stay linked,
and no way back. Every other table's matching rows are deleted."""


@dataclass(frozen=True)
class Treatment:
    """What an erasure does to one table, as SQL over a row ``t`` and the key row ``s``."""

    match: str
    """The rows it touches (located, rewritten, their old files purged)."""
    delete: str | None
    """Of those, the rows it deletes; ``None``: all of them, unless :attr:`update` is given."""
    update: Mapping[str, str] | None
    """What the touched rows it keeps get written (column -> SQL); ``None``: nothing kept."""


def treatment(table: str) -> Treatment:
    """The table's :class:`Treatment`: the subject's rows (:data:`RULES`) deleted, or redacted
    (:data:`REDACTIONS`), and in the other rows a shared id of the subject re-keyed."""
    own, redact, columns = RULES[table], REDACTIONS.get(table), ENTITY_COLUMNS.get(table, ())
    match = f"({own}) OR {holds_rekeyed(columns)}" if columns else own
    if redact is not None:
        match = f"{match} OR {_SUCCEEDS_THE_SUBJECTS}" if "superseded_by" in redact else match
        return Treatment(match=match, delete=None, update=redact)
    if not columns:
        return Treatment(match=match, delete=None, update=None)
    return Treatment(match=match, delete=own, update={c: rekeyed(c) for c in columns})


TREATMENTS: Final[Mapping[str, Treatment]] = {table: treatment(table) for table in RULES}
"""Every table :data:`RULES` covers: what an erasure touches, deletes and rewrites in it."""


REKEYED_PREFIX: Final = "rk-"
"""How a re-keyed entity id begins (then :data:`REKEYED_HEX` hex characters)."""
REKEYED_HEX: Final = 16


def rekeyed_id(secret: str, old: str) -> str:
    """The new id of a re-keyed entity id: an HMAC-SHA256 of the old id under the request's
    secret, so every table and every rerun of the request maps it alike, and nobody without the
    secret (never stored with the data) can map the subject's id to it."""
    digest = hmac.new(secret.encode("utf-8"), old.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{REKEYED_PREFIX}{digest[:REKEYED_HEX]}"


def unlinked_id(secret: str, old: str) -> str:
    """A correlation id's new id (the SQL of :data:`REDACTIONS`: ``sha2(concat(id, secret), 256)``)."""
    return hashlib.sha256(f"{old}{secret}".encode()).hexdigest()


def rekeys(secret: str, shared: Iterable[str]) -> dict[str, str]:
    """Old id -> new id for every shared id of the subject (:func:`rekeyed_id`)."""
    return {old: rekeyed_id(secret, old) for old in sorted(set(shared))}


@dataclass(frozen=True)
class EntitySplit:
    """The entity ids found for a subject, by what the erasure does with them."""

    own: tuple[str, ...]
    """The subject's identifiers: its rows under them go, and the scan looks for them."""
    shared: tuple[str, ...]
    """Those of :attr:`own` other persons' rows hold too: re-keyed in those rows."""
    borrowed: tuple[str, ...]
    """Other persons' own ids a resolver gave the subject too: left in their rows, not sought."""


def split_entities(
    found: Iterable[str], derived: Iterable[str], held_by_others: Iterable[str]
) -> EntitySplit:
    """Sort the subject's entity ids (``found``) by ``derived`` (the ids its own keys give:
    its identities resolved alone, and an id the request named) and ``held_by_others`` (ids
    on rows that are not the subject's). An id nobody else holds is the subject's whatever
    made it; a shared id is the subject's (re-keyed) if it derives from the subject's keys,
    else borrowed."""
    ids, mine, others = set(found), set(derived), set(held_by_others)
    borrowed = (ids & others) - mine
    shared = ids & others & mine
    return EntitySplit(tuple(sorted(ids - borrowed)), tuple(sorted(shared)), tuple(sorted(borrowed)))


@dataclass(frozen=True)
class Subject:
    """Every identifier of one data subject found in the retained history (never logged)."""

    emails: tuple[str, ...]
    orders: tuple[str, ...]
    entities: tuple[str, ...]
    """The subject's own entity ids (:class:`EntitySplit`), shared ones included."""
    shared: tuple[str, ...] = ()
    """Those of :attr:`entities` other persons' rows hold too: re-keyed in those rows."""
    borrowed: tuple[str, ...] = ()
    """Other persons' ids a resolver gave the subject too: not the subject's identifiers."""
    correlations: tuple[str, ...] = ()
    """The ids of every correlation row (any retained version, candidate or view) with a side
    in :attr:`entities`: a digest of the two entity ids, so anyone who knows one can recompute
    it. Re-keyed in the tables (:data:`REDACTIONS`) and in work files (review files)."""

    @property
    def identifiers(self) -> tuple[str, ...]:
        """Everything that must be found nowhere after the erasure (re-keyed old ids included)."""
        return tuple(sorted({*self.emails, *self.orders, *self.entities, *self.correlations}))

    @property
    def exclusive(self) -> tuple[str, ...]:
        """The subject's entity ids no other person's rows hold: rows under them are the subject's."""
        return tuple(sorted(set(self.entities) - set(self.shared)))

    def counts(self) -> dict[str, int]:
        """How many identifiers of each kind (what the ledger may record: no values)."""
        return {
            "emails": len(self.emails),
            "orders": len(self.orders),
            "entities": len(self.entities),
            "shared_entities": len(self.shared),
            "borrowed_entities": len(self.borrowed),
            "correlations": len(self.correlations),
        }

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


def key_row(
    spark: SparkSession, subject: Subject, replacement: str = "", secret: str | None = None
) -> DataFrame:
    """The one row :data:`TREATMENTS` join with, bound as data (:func:`key_values`)."""
    return spark.createDataFrame([key_values(subject, replacement, secret)], KEY_SCHEMA)


KEY_SCHEMA: Final = (
    "emails array<string>, orders array<string>, entities array<string>, tokens array<string>, "
    "rekeys map<string,string>, correlations array<string>, replacement string, secret string"
)


def key_values(subject: Subject, replacement: str = "", secret: str | None = None) -> tuple[object, ...]:
    """The key row's values (:data:`KEY_SCHEMA`): the identifiers as arrays (``entities``: the
    subject's ids no other person holds; ``tokens`` lower-cased, as raw text is cut), the shared
    ids' new ids (``rekeys``, :func:`rekeys`), what a redacted value becomes (``replacement``)
    and the secret that re-keys ids (the request's, or a fresh one; never stored with the data)."""
    import secrets

    key = secret if secret is not None else secrets.token_hex(32)
    return (
        list(subject.emails),
        list(subject.orders),
        list(subject.exclusive),
        sorted({i.lower() for i in subject.identifiers}),
        rekeys(key, subject.shared),
        list(subject.correlations),
        replacement,
        key,
    )


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
    own = F.coalesce(own, F.lit(False))  # an email-less event of another order is not the subject's
    entities = set(_values(silver.where(own), F.col("entity_id")))
    entities |= _entities_under_every_resolver(silver, emails)
    named = {entity} if entity else set()
    entities |= named
    others = _values(silver.where(~own & F.col("entity_id").isin(sorted(entities))), F.col("entity_id"))
    derived = (_entities_under_every_resolver(silver.where(own), emails) | named) if others else set()
    split = split_entities(entities, derived, others)
    subject = Subject(
        tuple(sorted(emails)),
        tuple(sorted(orders)),
        split.own,
        shared=split.shared,
        borrowed=split.borrowed,
        correlations=tuple(sorted(correlations_of(registry, split.own))),
    )
    log.info("subject found: %s", subject.counts())
    return subject


CORRELATION_TABLES: Final = tuple(REDACTIONS)
"""The tables that hold correlation rows (their ids, and a successor's in ``superseded_by``)."""


def correlations_of(registry: TableRegistry, entities: Sequence[str]) -> set[str]:
    """The id of every correlation row with a side in ``entities``, in every retained version and
    open candidate of every table that holds correlations (see :attr:`Subject.correlations`)."""
    from pyspark.sql import functions as F

    if not entities:
        return set()
    found: set[str] = set()
    sides = F.col("entity_a").isin(list(entities)) | F.col("entity_b").isin(list(entities))
    for name in CORRELATION_TABLES:
        if name not in registry.names():
            continue
        rows = _every_version(registry.get(name), ["correlation_id", "entity_a", "entity_b"])
        if rows is not None:
            found |= set(_values(rows.where(sides), F.col("correlation_id")))
    return found


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
    columns = ["domain", "event_id", "customer_email", "card_fingerprint", "order_id", "entity_id"]
    rows = _every_version(registry.get(TableName.SILVER_EVENTS), columns)
    return None if rows is None else rows.localCheckpoint()


def _every_version(table: Table, columns: Sequence[str]) -> DataFrame | None:
    """``columns`` of ``table``'s rows in every retained version and open candidate, distinct."""
    if not table.exists() or table.current_version() is None:
        return None
    frames = [table.read(v).select(*columns) for v in table.retained_versions()]
    frames += [
        table.read_candidate(table.open_candidate(n, None)).select(*columns) for n in table.list_candidates()
    ]
    return union_all(frames).distinct()


def _entities_under_every_resolver(silver: DataFrame, emails: set[str]) -> set[str]:
    """The id each known resolver version gives the subject's addresses, over the identities of
    ``silver`` (today's; or the subject's own rows alone: the ids its own keys derive)."""
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
