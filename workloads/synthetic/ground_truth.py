"""The ground truth: ``_ground_truth.json`` beside the deliveries, saying who every email
variant really is, which persons form rings and households, and what the lakehouse must do
with every planted fault.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Final

from workloads.silver.lateness import LatenessRule
from workloads.synthetic.delivery import Tally
from workloads.synthetic.population import Population
from workloads.vocabulary import FEEDS

GROUND_TRUTH_FILE: Final = "_ground_truth.json"


def identity_truth(population: Population) -> dict[str, object]:
    """Persons, email identities, rings, ring assets and households, as JSON values."""
    persons: dict[str, object] = {}
    identities: dict[str, str] = {}
    for person in population.persons:
        persons[person.person_id] = {
            "emails": list(person.emails),
            "cards": [*person.own_cards, *person.ring_cards],
            "devices": [*person.own_devices, *person.ring_devices],
            "ring": person.ring,
        }
        for email in person.emails:
            identities[email] = person.person_id
    rings = {
        ring.ring_id: [population.persons[m].person_id for m in ring.members] for ring in population.rings
    }
    ring_assets = {
        ring.ring_id: {
            "cards": list(ring.cards),
            "devices": list(ring.devices),
            "ip_prefix": ring.ip_prefix,
            "merchants": list(ring.merchants),
        }
        for ring in population.rings
    }
    device_users: dict[str, list[str]] = {}
    for person in population.persons:
        if person.ring is None:
            for device in person.own_devices:
                device_users.setdefault(device, []).append(person.person_id)
    households = {d: sorted(users) for d, users in sorted(device_users.items()) if len(users) > 1}
    return {
        "identities": identities,
        "persons": persons,
        "rings": rings,
        "ring_assets": ring_assets,
        "households": households,
    }


def ground_truth_document(
    settings: Mapping[str, object],
    policy: Mapping[str, LatenessRule],
    window: Mapping[str, str],
    population: Population,
    tally: Tally,
) -> dict[str, object]:
    """The whole ground truth: settings, policy, window, identities, faults and counts."""
    faults = sorted(tally.faults, key=lambda f: (f.file, f.line))
    return {
        "settings": dict(settings),
        "policy": {feed: asdict(rule) for feed, rule in sorted(policy.items())},
        "window": dict(window),
        **identity_truth(population),
        "faults": [asdict(f) for f in faults],
        "counts": {
            feed: {
                "lines": tally.lines[feed],
                "files": tally.files[feed],
                "fates": dict(sorted(tally.fates[feed].items())),
            }
            for feed in FEEDS
        },
    }


def write_ground_truth(out_dir: Path, document: Mapping[str, object]) -> Path:
    """Write the document as sorted, indented ASCII JSON; return its path."""
    path = out_dir / GROUND_TRUTH_FILE
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        json.dump(document, handle, sort_keys=True, indent=1, ensure_ascii=True)
        handle.write("\n")
    return path
