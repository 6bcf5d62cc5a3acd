"""Labelled truth: who every identity really is, and which persons really share assets.

**The labelled truth file** is a JSON object. The evaluator reads three keys and ignores
every other one, so the synthetic generator's ``_ground_truth.json`` (which also lists
its settings, planted faults and counts) is a labelled truth file as it stands; a
hand-labelled sample of a real feed can be one too:

.. code-block:: json

    {
      "identities": {"<identity as spelt in the feed's email field>": "<person id>"},
      "rings":      {"<ring id>": ["<person id>", "..."]},
      "households": {"<household id>": ["<person id>", "..."]}
    }

* ``identities`` (required, non-empty): every labelled identity, spelt exactly as the
  feed delivers it (case, dots, ``+tags`` and padding included: telling that two spellings
  are one person is the resolver's job, so the truth labels each spelling), and its true
  person.
* ``rings``, ``households`` (optional): groups of persons that really share assets
  (fraud rings share cards and devices, households a device). Every pair of persons in
  one group is a true shared-asset pair.

**Where it is found** (:func:`find_truth`): a path given explicitly (``lakehouse replay
--truth PATH``), else the file named :data:`TRUTH_FILE` at the root of the delivery
folders the lakehouse ingested (the ``source`` of its recorded ingest runs, or that
folder's parent when a feed folder was ingested). Real feeds have no such file: then
there is no labelled truth, which is reported, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakehouse.errors import ConfigError
from lakehouse.models import describe_validation_error

log = logging.getLogger(__name__)

TRUTH_FILE: Final = "_ground_truth.json"
"""The conventional name of a labelled truth file at the root of a delivery folder tree."""

__all__ = ["TRUTH_FILE", "LabelledTruth", "TruthSearch", "find_truth", "load_truth"]


class _TruthDocument(BaseModel):
    """The keys of a labelled truth file the evaluator reads (others are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    identities: dict[str, str] = Field(min_length=1)
    rings: dict[str, list[str]] = Field(default_factory=dict)
    households: dict[str, list[str]] = Field(default_factory=dict)


@dataclass(frozen=True)
class LabelledTruth:
    """A labelled truth file, loaded: identities -> persons, and the shared-asset groups."""

    source: str
    """Where the labels came from (the file's path)."""
    digest: str
    """sha256 of the file's bytes: which labels a recorded figure was measured against."""
    person_of: Mapping[str, str]
    """Identity (as spelt in the feed) -> true person."""
    groups: Mapping[str, tuple[str, ...]]
    """``rings/<id>`` and ``households/<id>`` -> their persons."""

    def person(self, identity: str) -> str | None:
        """The true person of an identity as spelt in a feed."""
        return self.person_of.get(identity)

    def rings(self) -> dict[str, tuple[str, ...]]:
        """Ring id -> its persons (the file's ``rings``)."""
        return self._kind("rings")

    def households(self) -> dict[str, tuple[str, ...]]:
        """Household id -> its persons (the file's ``households``)."""
        return self._kind("households")

    def _kind(self, kind: str) -> dict[str, tuple[str, ...]]:
        prefix = f"{kind}/"
        return {key.removeprefix(prefix): g for key, g in self.groups.items() if key.startswith(prefix)}


def load_truth(path: Path) -> LabelledTruth:
    """Read and validate a labelled truth file; a bad file is one line naming it and the key."""
    if not path.is_file():
        raise ConfigError(f"{path}: labelled truth file not found")
    data = path.read_bytes()
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: labelled truth is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: labelled truth must be a JSON object with an 'identities' key")
    try:
        document = _TruthDocument.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from None
    person_of: dict[str, str] = {}
    for identity, person in sorted(document.identities.items()):
        if not identity.strip() or not person.strip():
            raise ConfigError(f"{path}: key 'identities.{identity}': identity and person must not be blank")
        person_of[identity] = person
    groups = {
        f"{kind}/{group}": tuple(members)
        for kind, found in (("rings", document.rings), ("households", document.households))
        for group, members in sorted(found.items())
    }
    truth = LabelledTruth(str(path), hashlib.sha256(data).hexdigest(), person_of, groups)
    log.info("labelled truth %s: %d identities, %d groups", path, len(person_of), len(groups))
    return truth


@dataclass(frozen=True)
class TruthSearch:
    """Where labelled truth was looked for, and what was found."""

    truth: LabelledTruth | None
    note: str
    """Why there is no truth (or where it came from), for the report."""


def find_truth(explicit: LabelledTruth | None, ingested_from: Iterable[str]) -> TruthSearch:
    """The labelled truth of the data: the explicit one, else the one file :data:`TRUTH_FILE`
    at the root of the folders the deliveries were ingested from (module docstring).

    Several different files for one lakehouse's deliveries are not guessed between.
    """
    if explicit is not None:
        return TruthSearch(explicit, f"labelled truth {explicit.source} (given)")
    sources = sorted(set(ingested_from))
    if not sources:
        return TruthSearch(None, "no ground truth: no recorded ingest says where the deliveries came from")
    found: set[Path] = set()
    for source in sources:
        folder = Path(source)
        for candidate in (folder / TRUTH_FILE, folder.parent / TRUTH_FILE):
            if candidate.is_file():
                found.add(candidate.resolve())
                break
    if not found:
        return TruthSearch(
            None,
            f"no ground truth: the ingested deliveries ({', '.join(sources)}) carry no {TRUTH_FILE}; "
            "quality from confirmed outcomes is not measured yet",
        )
    if len(found) > 1:
        listed = ", ".join(str(p) for p in sorted(found))
        return TruthSearch(
            None, f"no ground truth: several labelled truth files ({listed}); pass one with --truth"
        )
    path = found.pop()
    return TruthSearch(load_truth(path), f"labelled truth {path} (beside the ingested deliveries)")
