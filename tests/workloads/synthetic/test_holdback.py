"""A feed held back and delivered late: folders moved aside and back, the files untouched."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from workloads.synthetic.holdback import HELD_DIR, delivery_dates, hold_back, release_held


def history(root: Path) -> Path:
    """Orders delivered on 2025-01-01..05 (one file each), refunds on 01-02 and 01-04."""
    for feed, days in (("orders", range(1, 6)), ("refunds", (2, 4))):
        for day in days:
            folder = root / feed / f"2025-01-0{day}"
            folder.mkdir(parents=True)
            (folder / "part-1.jsonl").write_text(f'{{"feed": "{feed}", "day": {day}}}\n', encoding="utf-8")
    (root / "orders" / "README.txt").write_text("not a delivery", encoding="utf-8")
    return root


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_newest_days_of_one_feed_are_held_then_released_unchanged(tmp_path: Path) -> None:
    root = history(tmp_path / "history")
    before = files(root)
    held = hold_back(root, "orders", 3)
    assert held.deliveries == ("2025-01-03", "2025-01-04", "2025-01-05")
    assert (held.last_delivered, held.newest) == (date(2025, 1, 2), date(2025, 1, 5))
    assert delivery_dates(root, "orders") == [date(2025, 1, 1), date(2025, 1, 2)]
    assert delivery_dates(root / HELD_DIR, "orders") == [date(2025, 1, d) for d in (3, 4, 5)]
    assert delivery_dates(root, "refunds") == [date(2025, 1, 2), date(2025, 1, 4)], "other feeds deliver"

    assert release_held(root, "orders") == ("2025-01-03", "2025-01-04", "2025-01-05")
    assert files(root) == before, "every file back in place, byte for byte"
    assert not (root / HELD_DIR).exists()
    assert release_held(root, "orders") == (), "nothing held: nothing to release"


def test_days_count_back_from_the_feeds_own_newest_delivery(tmp_path: Path) -> None:
    root = history(tmp_path / "history")
    held = hold_back(root, "refunds", 2)
    assert held.deliveries == ("2025-01-04",), "01-03 had no refunds delivery"
    assert held.last_delivered == date(2025, 1, 2)
    everything = hold_back(root, "orders", 30)
    assert everything.last_delivered is None
    assert len(everything.deliveries) == 5


@pytest.mark.parametrize(
    ("feed", "days", "message"),
    [
        ("nope", 3, "no feed 'nope'"),
        ("orders", 0, "at least one day"),
        ("logins", 3, "no delivery folders"),
    ],
    ids=["unknown-feed", "no-days", "no-deliveries"],
)
def test_a_hold_back_that_cannot_be_done_is_refused_and_moves_nothing(
    tmp_path: Path, feed: str, days: int, message: str
) -> None:
    root = history(tmp_path / "history")
    before = files(root)
    with pytest.raises(ValueError, match=message):
        hold_back(root, feed, days)
    assert files(root) == before
