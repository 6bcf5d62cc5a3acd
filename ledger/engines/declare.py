"""Changing ``conf/engines.yaml``: declare the next version of an engine, fill pending fingerprints.

Both edit the file as text, so its comments and layout are kept, and both check the
result before it replaces the file: the new text is written to a temporary file beside
it, loaded back with :func:`~ledger.engines.catalog.load_engines`, and moved into place
only if it declares exactly what was intended.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import JsonValue, ValidationError

from lakehouse.errors import ConfigError, EngineError
from ledger.engines.catalog import PENDING, EngineSpec, load_engines
from ledger.engines.fingerprint import fingerprint
from ledger.entries import EngineDeclared

log = logging.getLogger(__name__)

_PENDING_LINE: Final = re.compile(
    rf"^(\s*(?:-\s+)?code_fingerprint:\s*)([\"']?){PENDING}\2(?=\s|$)", re.MULTILINE
)


def declare(
    path: Path | str,
    *,
    name: str,
    implementation: str,
    effective_from: date,
    description: str,
    parameters: dict[str, JsonValue] | None = None,
    reference_data: dict[str, str] | None = None,
    model_versions: dict[str, str] | None = None,
    consumes: Sequence[str] = (),
    produces: Sequence[str] = (),
    run_id: str | None = None,
    search_path: Sequence[str] | None = None,
) -> EngineDeclared:
    """Declare the next version of an engine in ``path`` and return its ledger entry.

    The version is one above the newest declared (1 for a new engine); the fingerprint is
    computed from the code now. The new item is appended as text at the end of the file,
    so comments and layout are kept; if the file does not end with its ``engines`` list
    (so that appending would not parse back to the same declarations), the file is
    rewritten deterministically with ``yaml.safe_dump`` instead, which drops comments.
    The caller appends the returned entry to the ledger. ``consumes`` / ``produces``
    default to the previous version's (a new version of an engine usually sits at the same
    place in the chain).
    """
    catalog = load_engines(path)
    versions = catalog.versions(name)
    latest = versions[-1] if versions else None
    try:
        spec = EngineSpec(
            name=name,
            version=latest.version + 1 if latest else 1,
            implementation=implementation,
            effective_from=effective_from,
            description=description,
            parameters=parameters or {},
            code_fingerprint=fingerprint(implementation, search_path=search_path),
            reference_data=reference_data or {},
            model_versions=model_versions or {},
            consumes=tuple(consumes) or (latest.consumes if latest else ()),
            produces=tuple(produces) or (latest.produces if latest else ()),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EngineError(f"cannot declare engine {name!r}: {first['loc'][0]}: {first['msg']}") from None
    if latest is not None:
        if _same_logic(latest, spec):
            raise EngineError(
                f"engine {latest.ref} already declares this code and these parameters; nothing to declare"
            )
        if spec.effective_from <= latest.effective_from:
            raise EngineError(
                f"{spec.ref} must take effect after {latest.ref} ({latest.effective_from}), "
                f"not {spec.effective_from}"
            )
    file = Path(path)
    expected = (*catalog.engines, spec)
    appended = _append_item(file.read_text(encoding="utf-8"), spec)
    texts = [appended, _dump(expected)] if appended is not None else [_dump(expected)]
    used = _replace_checked(file, texts, lambda engines: engines == expected)
    if used is None:
        raise EngineError(f"{file}: could not write the declaration of {spec.ref} back; edit it by hand")
    log.info(
        "declared %s in %s (fingerprint %s%s)",
        spec.ref,
        file,
        spec.code_fingerprint[:12],
        "" if used == 0 else "; rewritten without comments",
    )
    return spec.declared_entry(run_id=run_id)


def fill_fingerprints(path: Path | str, *, search_path: Sequence[str] | None = None) -> list[str]:
    """Replace every ``pending`` fingerprint in ``path`` with the code's; returns the refs filled.

    Edits only those values in place (comments kept); refuses, changing nothing, if an
    engine's module is missing or the file's layout makes the edit ambiguous.
    """
    file = Path(path)
    catalog = load_engines(file)
    pending = [e for e in catalog.engines if e.fingerprint_pending]
    if not pending:
        return []
    values = [fingerprint(e.implementation, search_path=search_path) for e in pending]
    text = file.read_text(encoding="utf-8")
    matches = list(_PENDING_LINE.finditer(text))
    if len(matches) != len(pending):
        raise EngineError(
            f"{file}: found {len(matches)} 'code_fingerprint: {PENDING}' lines for {len(pending)} pending "
            f"engines; fill them by hand with lakehouse engines fingerprint"
        )
    pieces = []
    last = 0
    for match, value in zip(matches, values, strict=True):
        pieces.append(text[last : match.start()] + match.group(1) + value)
        last = match.end()
    new_text = "".join(pieces) + text[last:]
    filled = {(e.name, e.version): v for e, v in zip(pending, values, strict=True)}

    def as_intended(engines: tuple[EngineSpec, ...]) -> bool:
        return [e.code_fingerprint for e in engines if (e.name, e.version) in filled] == values

    if _replace_checked(file, [new_text], as_intended) is None:
        raise EngineError(f"{file}: could not fill the pending fingerprints unambiguously; edit it by hand")
    refs = [e.ref for e in pending]
    log.info("filled the fingerprints of %s in %s", ", ".join(refs), file)
    return refs


def _same_logic(a: EngineSpec, b: EngineSpec) -> bool:
    left, right = a.identity(), b.identity()
    return (
        a.implementation == b.implementation
        and left.code_fingerprint == right.code_fingerprint
        and left.config_digest == right.config_digest
        and left.reference_data == right.reference_data
        and left.model_versions == right.model_versions
    )


def _item(spec: EngineSpec) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": spec.name,
        "version": spec.version,
        "implementation": spec.implementation,
        "effective_from": spec.effective_from,
        "description": spec.description,
        "parameters": dict(spec.parameters),
        "code_fingerprint": spec.code_fingerprint,
    }
    if spec.reference_data:
        item["reference_data"] = dict(spec.reference_data)
    if spec.model_versions:
        item["model_versions"] = dict(spec.model_versions)
    if spec.consumes:
        item["consumes"] = list(spec.consumes)
    if spec.produces:
        item["produces"] = list(spec.produces)
    return item


def _append_item(text: str, spec: EngineSpec) -> str | None:
    """``text`` with the spec appended as a list item of ``engines``, or None if unsure how."""
    match = re.search(r"^( *)- name:", text, flags=re.MULTILINE)
    if match is None:
        return None
    indent = match.group(1)
    block = yaml.safe_dump([_item(spec)], sort_keys=False, default_flow_style=False, allow_unicode=True)
    lines = [indent + line if line else line for line in block.splitlines()]
    return text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def _dump(engines: Sequence[EngineSpec]) -> str:
    header = "# Declared engine versions; rewritten by lakehouse engines declare (comments were not kept).\n"
    body = yaml.safe_dump(
        {"engines": [_item(e) for e in engines]},
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )
    return header + body


def _replace_checked(
    file: Path, texts: Sequence[str], accept: Callable[[tuple[EngineSpec, ...]], bool]
) -> int | None:
    """Replace ``file`` atomically with the first of ``texts`` that loads back as ``accept`` wants.

    Each text is written to a temporary file beside ``file`` and loaded from there, so what
    is checked is exactly what is moved into place. Returns the index of the text used, or
    None (``file`` unchanged) when none is accepted.
    """
    for index, text in enumerate(texts):
        handle, temp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            try:
                loaded = load_engines(temp).engines
            except ConfigError:
                continue
            if accept(loaded):
                os.replace(temp, file)
                return index
        finally:
            Path(temp).unlink(missing_ok=True)
    return None
