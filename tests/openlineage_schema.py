"""Validate OpenLineage events against the specification's JSON schemas (``tests/data/openlineage``).

An event is checked against the core schema (``OpenLineage.json``, RunEvent), and every facet
whose ``_schemaURL`` names one of the standard facet schemas kept here is checked against that
schema too; a facet naming a schema not kept here (our custom ``lakehouse_run`` facet) is
checked by the core schema only (a RunFacet: ``_producer`` and ``_schemaURL``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent / "data" / "openlineage"


@cache
def _registry() -> tuple[Any, dict[str, Any]]:
    from referencing import Registry, Resource

    documents = {}
    for path in sorted(SCHEMAS.glob("*.json")):
        document = json.loads(path.read_text())
        documents[document["$id"]] = document
    registry = Registry().with_resources((uri, Resource.from_contents(doc)) for uri, doc in documents.items())
    return registry, documents


def _validator(uri: str) -> Any:
    from jsonschema import Draft202012Validator

    registry, documents = _registry()
    base, _, pointer = uri.partition("#")
    schema = {"$ref": uri} if pointer else documents[base]
    return Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def _facets(event: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(event["run"].get("facets", {}).values()) + list(event["job"].get("facets", {}).values())
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        found += list(dataset.get("facets", {}).values())
        found += list(dataset.get("inputFacets", {}).values()) + list(
            dataset.get("outputFacets", {}).values()
        )
    return found


def schema_errors(event: dict[str, Any]) -> list[str]:
    """Every way ``event`` breaks the schemas (empty: it validates).

    jsonschema checks the ``uuid`` format itself; ``date-time`` and ``uri`` need optional
    packages this environment does not have, so they are checked here directly.
    """
    _, documents = _registry()
    errors = [f"RunEvent: {e.message}" for e in _validator(CORE + "#/$defs/RunEvent").iter_errors(event)]
    errors += _formats(event)
    for facet in _facets(event):
        url = str(facet.get("_schemaURL", ""))
        if url.partition("#")[0] in documents and url != CORE:
            errors += [f"{url}: {e.message}" for e in _validator(url).iter_errors(facet)]
    return errors


def _formats(event: dict[str, Any]) -> list[str]:
    from datetime import datetime
    from urllib.parse import urlparse

    errors = []
    try:
        if datetime.fromisoformat(str(event.get("eventTime"))).tzinfo is None:
            errors.append("eventTime has no time zone")
    except ValueError:
        errors.append(f"eventTime {event.get('eventTime')!r} is not a date-time")
    uris = [event.get("producer")]
    for facet in _facets(event):
        uris += [facet.get("_producer"), facet.get("_schemaURL")]
    errors += [f"{u!r} is not a URI" for u in uris if not (isinstance(u, str) and urlparse(u).scheme)]
    return errors


def kept_facet_schemas() -> set[str]:
    """The ``$id`` of every schema kept here."""
    return set(_registry()[1])


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a JSON-lines file the file transport wrote."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
