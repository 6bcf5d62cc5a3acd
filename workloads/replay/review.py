"""What an approver reads: the per-key diff, every transition, and the review file.

Written under ``<workdir>/replays/<run_id>/`` by the build (:func:`write_review`): the
changed keys (``diff/``), every supersession, retraction and insertion
(``transitions/``), and ``review.json`` with a sample of the changes, every high-impact
change (:func:`review_lists`), the candidate hash and the counts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from workloads.replay import candidate as cand
from workloads.replay.answer import CORRELATIONS, AnswerTable
from workloads.replay.diff import UNCHANGED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

REVIEW_FILE: Final = "review.json"


def review_dir(registry: TableRegistry, run_id: str) -> Path:
    """Where the review of ``run_id`` is written."""
    return registry.config.workdir_path / "replays" / run_id


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(r.asDict(), default=str)) for r in df.collect()]


def review_lists(
    transitions: DataFrame, *, threshold: float, sample_size: int, answer: AnswerTable = CORRELATIONS
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sample of changes, every high-impact change): |delta of the answer table's impact figure|
    (``confidence``) >= threshold, or retracted."""
    from pyspark.sql import functions as F

    key = F.coalesce(F.col("new_id"), F.col("old_id"))
    ordered = transitions.orderBy("kind", key, "old_id")
    delta = F.col(cand.impact_delta(answer))
    high = ordered.where((F.abs(delta) >= threshold) | (F.col("kind") == cand.RETRACTED))
    return _rows(ordered.limit(sample_size)), _rows(high)


def write_review(
    directory: Path,
    per_key: DataFrame,
    transitions: DataFrame,
    review: Mapping[str, Any],
) -> str:
    """Write the per-key diff (changed keys), every transition and the review file; returns the folder."""
    from pyspark.sql import functions as F

    directory.mkdir(parents=True, exist_ok=True)
    changed = per_key.where(F.col("change") != UNCHANGED)
    changed.coalesce(1).write.mode("overwrite").json((directory / "diff").as_uri())
    transitions.coalesce(1).write.mode("overwrite").json((directory / "transitions").as_uri())
    log.debug("writing the review of run changes to %s", directory)
    (directory / REVIEW_FILE).write_text(
        json.dumps(dict(review), sort_keys=True, indent=1, default=str), encoding="utf-8"
    )
    return str(directory)


def add_to_review(location: str, **fields: Any) -> None:
    """Add ``fields`` to the review file in ``location`` (the checks' examples, once judged)."""
    path = Path(location) / REVIEW_FILE
    review = {**read_review(location), **fields}
    path.write_text(json.dumps(review, sort_keys=True, indent=1, default=str), encoding="utf-8")


def read_review(location: str | None) -> dict[str, Any]:
    """The review file in ``location`` (empty when there is none)."""
    if not location:
        return {}
    path = Path(location) / REVIEW_FILE
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
