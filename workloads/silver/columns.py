"""The column names every Silver module shares, and the one CASE helper they build with.

``silver.events`` columns (:data:`SILVER_COLUMNS`), the canonical business columns with
their Spark types (:data:`BUSINESS_COLUMNS`, as in ``conf/lakehouse.yaml``) and the Bronze
coordinates that key quarantine and exception rows (:data:`COORDINATES`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["BUSINESS_COLUMNS", "COORDINATES", "SILVER_COLUMNS", "case_when"]

COORDINATES: Final[tuple[str, ...]] = ("_manifest_id", "_source_file", "_line")
"""Where a row sits in Bronze: the key of quarantine and exception rows."""

BUSINESS_COLUMNS: Final[Mapping[str, str]] = {
    "customer_email": "string",
    "card_fingerprint": "string",
    "device_id": "string",
    "order_id": "string",
    "amount": "decimal(18,2)",
    "currency": "string",
    "merchant_id": "string",
    "ip": "string",
    "success": "boolean",
    "label": "string",
}
"""Canonical business columns and their Spark types (as in conf/lakehouse.yaml)."""

SILVER_COLUMNS: Final[tuple[str, ...]] = (
    "event_id",
    "domain",
    "event_time",
    "event_date",
    "event_month",
    "ingest_time",
    "accounting_date",
    "lateness",
    "schema_version",
    "revision",
    "customer_email",
    "entity_id",
    "resolver",
    "card_fingerprint",
    "device_id",
    "order_id",
    "amount",
    "currency",
    "merchant_id",
    "ip",
    "success",
    "label",
    "_manifest_id",
    "_source_file",
    "_line",
)


def case_when(checks: Sequence[tuple[Column, Column]]) -> Column:
    """CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... END (null when no check matches)."""
    from pyspark.sql import functions as F

    if not checks:
        return F.lit(None)
    result = F.when(checks[0][0], checks[0][1])
    for condition, value in checks[1:]:
        result = result.when(condition, value)
    return result
