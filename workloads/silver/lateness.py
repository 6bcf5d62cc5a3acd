"""The lateness policy of each feed (``conf/policies.yaml``, section ``lateness``).

A fact is on time while ``ingest - event_time <= allowed_lateness_days``. A late fact for a
period (UTC month) that is still open is processed normally; the period closes
``period_close_grace_days`` after the first day of the next month, and a late fact for a
closed period gets the feed's ``closed_period_action`` (reopen, adjust or hold).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from workloads.vocabulary import FEEDS, ClosedPeriodAction

DEFAULT_POLICY_PATH: Final[Path] = Path(__file__).resolve().parents[2] / "conf" / "policies.yaml"
"""The repository's policy file, used when no other is named."""


@dataclass(frozen=True)
class LatenessRule:
    """One feed's lateness policy (see conf/policies.yaml for the semantics)."""

    allowed_lateness_days: int
    period_close_grace_days: int
    closed_period_action: ClosedPeriodAction


def load_lateness_policy(path: Path = DEFAULT_POLICY_PATH) -> dict[str, LatenessRule]:
    """Read the ``lateness:`` section of a policies YAML file into one rule per feed.

    Raises ValueError naming the file and key when a feed is missing or a value has the
    wrong type, so a broken policy fails here rather than deep inside a build.
    """
    import yaml

    with path.open(encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    if not isinstance(document, dict) or not isinstance(document.get("lateness"), dict):
        raise ValueError(f"{path}: no 'lateness' mapping")
    section: dict[str, object] = document["lateness"]
    policy: dict[str, LatenessRule] = {}
    actions = [action.value for action in ClosedPeriodAction]
    for feed, raw in section.items():
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: lateness.{feed} is not a mapping")
        allowed = raw.get("allowed_lateness_days")
        grace = raw.get("period_close_grace_days")
        action = raw.get("closed_period_action")
        if not isinstance(allowed, int) or isinstance(allowed, bool) or allowed < 0:
            raise ValueError(f"{path}: lateness.{feed}.allowed_lateness_days must be an int >= 0")
        if not isinstance(grace, int) or isinstance(grace, bool) or grace < 0:
            raise ValueError(f"{path}: lateness.{feed}.period_close_grace_days must be an int >= 0")
        if action not in actions:
            raise ValueError(
                f"{path}: lateness.{feed}.closed_period_action must be one of {sorted(actions)}, "
                f"got {action!r}"
            )
        policy[str(feed)] = LatenessRule(allowed, grace, ClosedPeriodAction(action))
    check_policy(policy)
    return policy


def check_policy(policy: Mapping[str, LatenessRule]) -> None:
    """Refuse a policy that has no rule for some feed."""
    missing = [feed for feed in FEEDS if feed not in policy]
    if missing:
        raise ValueError(f"lateness policy has no rule for feed(s): {', '.join(missing)}")
