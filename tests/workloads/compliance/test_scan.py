"""The erasure's independent scan: it finds a subject by salted digests only, as a whole token,
in Parquet rows, Parquet footers and any other file's bytes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from workloads.compliance.scan import identifier_digest, scan, tokens

SALT = "a1b2"
SUBJECT = "alice@example.org"


def digests(*identifiers: str) -> list[str]:
    return [identifier_digest(SALT, i) for i in identifiers]


def test_tokens_cut_addresses_and_ids_out_of_any_text_lower_cased() -> None:
    line = '{"customer_email":" Alice@Example.org ","order_id":"ord-1","note":"see alice@example.org."}'
    found = tokens(line)
    assert SUBJECT in found
    assert "ord-1" in found
    assert SUBJECT not in tokens("malice@example.org"), "a longer address is another subject"


def test_the_scan_finds_the_subject_in_rows_footers_and_bytes_and_nowhere_else(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    table = pa.table(
        {"id": [1, 2], "who": ["bob@example.org", "ALICE@example.org"], "tags": [["x"], ["ord-9"]]}
    )
    pq.write_table(table, lake / "part-0.parquet")
    pq.write_table(pa.table({"id": [3], "who": ["bob@example.org"]}), lake / "part-1.parquet")
    (lake / "00001.json").write_text('{"stats":{"min":"alice@example.org"}}')
    (lake / "review.json").write_text('{"sample":["malice@example.org"]}')
    deliveries = tmp_path / "lake" / "history"
    deliveries.mkdir()
    (deliveries / "orders.jsonl").write_text('{"email":"alice@example.org"}')

    result = scan([lake], SALT, digests(SUBJECT, "ord-9"), skip=[deliveries])
    hits = result.hits

    where = {(Path(h.path).name, h.where) for h in hits}
    assert ("part-0.parquet", "who") in where
    assert ("part-0.parquet", "tags") in where, "list columns are read too"
    assert ("part-0.parquet", "footer statistics") in where, "min/max statistics are metadata too"
    assert ("00001.json", "bytes") in where
    assert not any(name in ("part-1.parquet", "review.json", "orders.jsonl") for name, _ in where)
    assert result.files == 4
    assert scan([lake], "another-salt", digests(SUBJECT), skip=[deliveries]).hits == (), "digests are salted"
