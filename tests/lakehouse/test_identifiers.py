"""Identifier tokens and salted digests as Spark columns cut and hash exactly as the erasure's
independent scan does in Python: the ingest filter and the scan must agree on what names a
subject."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.identifiers import identifier_tokens, salted_digests
from workloads.compliance.scan import identifier_digest, tokens

TEXTS = [
    '{"customer_email":" Alice@Example.org ","order_id":"ord-1","note":"see alice@example.org."}',
    "ord-2,2025-01-02T10:00:00Z,Bob.Smith+tag@mail.example,  12.50",
    "...leading and trailing dots... x.y.z. malice@example.org;;;",
    "",
    "ÄÖü naïve café — bob@example.org\t\r",
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_spark_tokens_and_salted_digests_equal_the_scans(spark_session: Any, text: str) -> None:
    from pyspark.sql import functions as F

    row = (
        spark_session.createDataFrame([(text,)], "raw string")
        .select(identifier_tokens(F.col("raw")).alias("tokens"))
        .select("tokens", salted_digests(F.col("tokens"), "s4lt'; --").alias("digests"))
        .first()
    )
    assert set(row["tokens"]) == tokens(text)
    assert set(row["digests"]) == {identifier_digest("s4lt'; --", token) for token in tokens(text)}


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_erasure_rules_sql_cut_equals_the_scans(spark_session: Any, text: str) -> None:
    """The raw-text rules of ``workloads.compliance.subject.RULES`` are SQL over a row ``t``."""
    from workloads.compliance.subject import _tokens_of

    row = (
        spark_session.createDataFrame([(text,)], "raw string")
        .alias("t")
        .selectExpr(f"{_tokens_of('raw')} AS tokens")
        .first()
    )
    assert set(row["tokens"]) == tokens(text)
