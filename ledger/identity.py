"""Identity of what a run read, what logic it ran and what it wrote (docs/concepts.md).

* :class:`InputRead`: the version / snapshot id of an input table actually read, plus the
  bounded range read (event-time interval, entity set, manifests).
* :class:`EngineIdentity`: engine ``name@version`` + code fingerprint + config digest +
  reference-data snapshots + model versions. Same input identity and same engine identity
  must give the same canonical output hash.
* :class:`OutputWritten`: the version a run wrote into a table (or a candidate of it).

All are frozen and serialise to canonical JSON, so they can sit inside ledger entries
and be hashed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

from lakehouse.digest import digest_of
from lakehouse.models import StrictModel


def _as_text_mapping(value: Any) -> Any:
    """Accept ``{name: 3}`` from YAML as ``{name: "3"}``: versions are identifiers, not numbers."""
    if isinstance(value, dict):
        return {
            k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in value.items()
        }
    return value


TextMapping = Annotated[dict[str, str], BeforeValidator(_as_text_mapping)]
"""A mapping of names to version identifiers (YAML integers become strings)."""


class EngineIdentity(StrictModel):
    """Everything that decides what an engine computes, apart from its input."""

    name: str
    version: int = Field(ge=1)
    code_fingerprint: str
    """sha256 of the engine's behaviour-relevant source (:mod:`ledger.engines.fingerprint`)."""
    config_digest: str
    """sha256 of the canonical JSON of the engine's parameters."""
    reference_data: TextMapping = Field(default_factory=dict)
    """Reference data the engine reads, name -> snapshot / version."""
    model_versions: TextMapping = Field(default_factory=dict)
    """Models the engine applies (MLflow), name -> version."""
    input_schemas: TextMapping = Field(default_factory=dict)
    """Schema versions of the rows the engine reads, as the build that ran it found them
    (e.g. ``silver.events`` -> the digest of its configured schema, ``source:orders`` -> the
    accepted source versions). Empty for a declared identity: the declaration names the
    logic, the run adds what it read."""

    @model_serializer(mode="wrap")
    def _omit_empty_schemas(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave ``input_schemas`` out when empty: identities recorded before the field existed
        keep their text and digest."""
        data: dict[str, Any] = handler(self)
        if not self.input_schemas:
            data.pop("input_schemas", None)
        return data

    @property
    def ref(self) -> str:
        """``name@version``, the engine's short name in tables and messages."""
        return f"{self.name}@{self.version}"

    @property
    def digest(self) -> str:
        """One hash over the whole identity: equal digests mean the same transformation."""
        return digest_of(self.model_dump(mode="json"))


class InputRead(StrictModel):
    """One input of a run: the table state actually read and the part of it that was read."""

    version: int
    """Delta version or Iceberg snapshot id read (pinned, never "whatever is current")."""
    range: dict[str, JsonValue] = Field(default_factory=dict)
    """The bounded range read, e.g. ``{"event_time": ["2025-01-01", "2025-02-01"]}``."""


class OutputWritten(StrictModel):
    """One output of a run: the version it wrote (serving, or a candidate's)."""

    version: int
    """Delta version or Iceberg snapshot id the run's write produced."""
    rows: int | None = None
    candidate: str | None = None
    """Set when the write went to a candidate (not visible until published)."""
    content_hash: str | None = None
    """:func:`lakehouse.digest.canonical_hash` of what was written, when computed."""
