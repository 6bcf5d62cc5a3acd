"""A crash at each step of an erasure, one after the other on the same request, ends after a
rerun in one complete erasure and one certificate; until verification passes, nothing says it
is complete. Built through the product on the hand-written history (shipped mixed formats)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig
from lakehouse.errors import InjectedFailure
from ledger import ErasureCertificate, RunFinished, open_ledger
from ledger.clock import FixedClock
from tests.conftest import Lakehouse, drop_all
from tests.erasure_search import files_naming
from tests.replay_history import CAROL, START, build
from workloads.compliance import ErasureRequest, erase
from workloads.compliance.erasure import ErasureStep

SUBJECT = "carol@example.com"
"""A login sharing a device with another person's order: rows in Bronze, Silver and Gold. Not
ann@, whose order id ``o1`` is short enough to turn up by chance as a token of binary files
(checksums, metadata), which the verification reads as bytes."""


@dataclass(frozen=True)
class Crashed:
    step: ErasureStep
    message: str
    certificates_after: int


@dataclass(frozen=True)
class Chain:
    crashes: list[Crashed]
    certificate: ErasureCertificate
    certificates: list[ErasureCertificate]
    failed_runs: list[str]
    leftovers: list[str]
    bobs_files: list[str]
    redacted_ids: set[str]
    """Every ``redacted:<certificate>`` value in Gold correlations after the rerun."""


@pytest.fixture(scope="module")
def chain(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Chain]:
    config = lakehouse_config.model_copy(update={"instance": f"ec{uuid.uuid4().hex[:6]}"})
    lh = Lakehouse(spark_session, config)
    folder = tmp_path_factory.mktemp("erase-crash")
    clock = FixedClock(START, step=timedelta(seconds=1))
    build(lh, clock, folder / "history")
    ledger = open_ledger(lh.registry, clock=clock)
    request = ErasureRequest(request_id="REQ-9", reason="GDPR art. 17", email=SUBJECT)
    crashes = []
    for step in ErasureStep:
        with pytest.raises(InjectedFailure) as failed:
            erase(lh.registry, ledger, request, deliveries=folder / "history", fail_at=step)
        count = len(ledger.reader.entries(kind="erasure_certificate"))
        crashes.append(Crashed(step, str(failed.value), count))
    result = erase(lh.registry, ledger, request, deliveries=folder / "history")
    assert result.certificate is not None
    finished = [e for e in ledger.reader.entries(kind="run_finished") if isinstance(e, RunFinished)]
    gold = lh.registry.get("gold.correlations").read()
    sides = [r[0] for r in gold.selectExpr("explode(array(entity_a, entity_b))").collect()]
    yield Chain(
        crashes=crashes,
        certificate=result.certificate,
        certificates=[
            e for e in ledger.reader.entries(kind="erasure_certificate") if isinstance(e, ErasureCertificate)
        ],
        failed_runs=[e.run_id for e in finished if e.status == "failed" and e.run_id.startswith("erase-")],
        leftovers=files_naming(lh.registry, [SUBJECT, CAROL]),
        bobs_files=files_naming(lh.registry, ["bob@example.com"]),
        redacted_ids={s for s in sides if s.startswith("redacted:")},
    )
    drop_all(lh.registry)


def test_each_crash_stops_its_step_and_writes_no_certificate(chain: Chain) -> None:
    assert [c.step for c in chain.crashes] == list(ErasureStep)
    assert all(f"injected failure {c.step.value}" in c.message for c in chain.crashes)
    assert [c.certificates_after for c in chain.crashes] == [0] * len(ErasureStep)


def test_the_rerun_completes_one_erasure_with_one_certificate_and_nothing_left(chain: Chain) -> None:
    assert [c.request_id for c in chain.certificates] == ["REQ-9"]
    assert chain.certificate.verification.passed
    assert chain.certificate.completes == tuple(chain.failed_runs), "it names the runs it completed"
    assert len(chain.failed_runs) == len(ErasureStep)
    assert chain.leftovers == [], "the test's own search finds the subject nowhere"
    assert chain.bobs_files, "other subjects' rows stay"


def test_the_certificate_lists_what_every_run_did_under_the_first_runs_id(chain: Chain) -> None:
    certificate = chain.certificate
    assert certificate.certificate_id == f"erasure-{chain.failed_runs[0].split('-', 1)[1]}"
    assert chain.redacted_ids == {f"redacted:{certificate.certificate_id}"}, "the values redacted name it"
    assert {"bronze.logins", "silver.events", "gold.correlations"} <= set(certificate.tables)
    assert certificate.tables["gold.correlations"].redacted
    assert all(e.versions_purged or e.rows for e in certificate.tables.values())
