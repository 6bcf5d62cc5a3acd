"""The benchmark lake: built once through the product, kept outside git, reused by every
benchmark that measures a built lake.

``python -m benchmarks lake --events N [--seed S] [--format F]`` generates a history and
builds Bronze (one ingest per feed), Silver and Gold with the product's own functions, as
the pipeline benchmark does, into ``<cache>/<key>/``:

* ``<cache>`` is ``$LAKEHOUSE_BENCH_CACHE``, else ``~/.cache/lakehouse-replay/lakes``;
* ``<key>`` names the size, the seed, the formats and the generator's version (a digest of
  the generator's sources and the lateness policy it plants faults by), so a changed
  generator never serves an old lake (:func:`lake_key`).

The folder holds ``state.json`` (the stages finished, with their seconds), ``live/`` (the
lake benchmarks run on: ``history/`` and ``lake/``, the layout of a benchmark's work dir)
and, once the build has finished, ``pristine/``: a copy of ``live/`` taken at the end.

Stages (:data:`STAGES`): generate, one ingest per feed, Silver, Gold, the pristine copy.
Each finished stage is written to ``state.json`` before the next starts, so a build stopped
halfway (killed, out of memory) continues at the first stage not finished: the product's
ingest skips a delivery Bronze already holds and completes an interrupted manifest record,
and Silver and Gold are rebuilt from their stage. A finished lake is reused as it is.

Why a restore to the same path and not a copy elsewhere: Iceberg's metadata (the catalog's
rows, ``metadata.json``, the manifest lists and manifests) holds absolute paths, so a copy
of the lake under another folder still points at the original's files, and writes there
would change them; Delta's log holds relative paths and would copy. So every benchmark
that uses the cached lake gets ``live/`` restored from ``pristine/`` first
(:func:`checkout`): the folder is removed and copied back, its immutable files (Parquet
data files and the generated deliveries) as hard links, everything else (logs, Iceberg
metadata, the SQLite catalog, the ledger's files) as real copies. A benchmark may then
change ``live/`` as it likes (erasures purge, replays publish); ``pristine/`` is checked
against the listing taken with it (size and modification time of every file) before each
restore, so a copy changed in place is refused, not served. The lake cannot be moved: a
state whose recorded path is not its folder's is rebuilt.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from workloads.vocabulary import FEEDS

if TYPE_CHECKING:
    from workloads.synthetic.generator import GeneratorSettings

CACHE_VARIABLE = "LAKEHOUSE_BENCH_CACHE"
STATE_FILE = "state.json"
PRISTINE_FILES = "pristine-files.json"
LIVE = "live"
PRISTINE = "pristine"
STAGES: tuple[str, ...] = ("generate", *(f"ingest {feed}" for feed in FEEDS), "silver", "gold", "pristine")
"""The build, in order; one entry of ``state.json``'s ``done`` each."""
EVENTS_PER_PERSON = 22 * 12
"""Events a person makes in the generator's 12 months (about 22 a month, measured)."""
MONTHS = 12

Progress = Callable[[str], None]


# --- the key -------------------------------------------------------------------------------


def cache_root(environ: Mapping[str, str], home: Path) -> Path:
    """Where cached lakes live: ``$LAKEHOUSE_BENCH_CACHE``, else ``~/.cache/lakehouse-replay/lakes``."""
    configured = environ.get(CACHE_VARIABLE, "").strip()
    return Path(configured).expanduser() if configured else home / ".cache" / "lakehouse-replay" / "lakes"


def digest_sources(sources: Mapping[str, bytes]) -> str:
    """A version of named contents: sha256 over the names (sorted) and their bytes, 12 hex digits."""
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + len(sources[name]).to_bytes(8, "big") + sources[name])
    return digest.hexdigest()[:12]


def lake_key(generator_version: str, seed: int, events: int, fmt: str | None = None) -> str:
    """The folder name of a cached lake: size, seed, formats (``mixed`` for the shipped default)
    and the generator's version, e.g. ``20000ev-seed7-mixed-gen3f2a9c1b04d2``."""
    if events < 1:
        raise ValueError(f"events must be >= 1, got {events}")
    return f"{events}ev-seed{seed}-{fmt or 'mixed'}-gen{generator_version}"


def generator_settings(events: int, seed: int) -> GeneratorSettings:
    """The history the benchmarks build on: 12 months of ``events / 264`` persons (at least 50)."""
    from workloads.synthetic.generator import GeneratorSettings

    return GeneratorSettings(entities=max(50, events // EVENTS_PER_PERSON), months=MONTHS, seed=seed)


def generator_sources() -> dict[str, bytes]:
    """What the generated history depends on: the generator's modules (the demo's is not one)
    and the lateness policy it plants late facts by."""
    import workloads.synthetic as synthetic
    from workloads.synthetic.generator import load_lateness_policy

    folder = Path(synthetic.__file__).parent
    sources = {p.name: p.read_bytes() for p in folder.glob("*.py") if p.name != "demo.py"}
    sources["lateness policy"] = repr(sorted(load_lateness_policy().items())).encode()
    return sources


# --- the state -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LakeState:
    """``state.json``: what the lake is and which stages are finished."""

    key: str
    events: int
    seed: int
    format: str | None
    generator_version: str
    path: str
    """The resolved ``live/`` folder the lake was built in (Iceberg's metadata names it)."""
    done: tuple[str, ...] = ()
    seconds: Mapping[str, float] = field(default_factory=dict)
    generated_events: int | None = None
    commit: str | None = None
    """The repository's commit when the build started."""

    @property
    def finished(self) -> bool:
        return not remaining(STAGES, self.done)

    def with_stage(self, stage: str, seconds: float) -> LakeState:
        """This state with ``stage`` finished in ``seconds``."""
        return replace(
            self,
            done=(*[s for s in self.done if s != stage], stage),
            seconds={**self.seconds, stage: round(seconds, 1)},
        )


def remaining(stages: Sequence[str], done: Iterable[str]) -> tuple[str, ...]:
    """The stages still to run: from the first one not done to the end (a stage after an
    unfinished one runs again, whatever the state says)."""
    finished = set(done)
    for index, stage in enumerate(stages):
        if stage not in finished:
            return tuple(stages[index:])
    return ()


def read_state(path: Path) -> LakeState | None:
    """The state in ``path``; None if there is none, or it is unreadable (the build starts over)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        raw["done"] = tuple(raw.get("done", ()))
        return LakeState(**raw)
    except (OSError, ValueError, TypeError):
        return None


def write_state(path: Path, state: LakeState) -> None:
    """Write ``state`` to ``path`` atomically (a rename), so a kill leaves the old or the new."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(asdict(state), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


def stale_reason(state: LakeState | None, expected: LakeState) -> str | None:
    """Why the folder's state cannot be continued or reused (its build starts over); None if it can."""
    if state is None:
        return None
    for name in ("key", "events", "seed", "format", "generator_version", "path"):
        if getattr(state, name) != getattr(expected, name):
            return f"its {name} is {getattr(state, name)!r}, not {getattr(expected, name)!r}"
    return None


# --- the pristine copy -----------------------------------------------------------------------


def listing(root: Path) -> dict[str, list[int]]:
    """Every file under ``root``: relative path -> [size, modification time in ns]."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        status = path.stat()
        found[path.relative_to(root).as_posix()] = [status.st_size, status.st_mtime_ns]
    return found


def differences(recorded: Mapping[str, Sequence[int]], found: Mapping[str, Sequence[int]]) -> list[str]:
    """What changed between two listings: files missing, added or changed (size or time)."""
    changed = [f"missing {p}" for p in sorted(set(recorded) - set(found))]
    changed += [f"added {p}" for p in sorted(set(found) - set(recorded))]
    changed += [
        f"changed {p}" for p in sorted(set(recorded) & set(found)) if list(recorded[p]) != list(found[p])
    ]
    return changed


def immutable(relative: str) -> bool:
    """A file no format and no product step ever opens for writing: a Parquet data file (tables
    write new files and delete old ones) or a generated delivery. Linked, not copied."""
    return relative.endswith(".parquet") or relative.startswith("history/")


def copy_lake(source: Path, target: Path) -> tuple[int, int]:
    """Copy ``source`` to ``target`` (which must not exist): immutable files as hard links, the
    rest as copies. Returns (files linked, files copied)."""
    linked = copied = 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        destination = target / relative
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if immutable(relative):
            os.link(path, destination)
            linked += 1
        else:
            shutil.copy2(path, destination)
            copied += 1
    return linked, copied


# --- the lake ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedLake:
    """A cached lake's folders."""

    folder: Path

    @property
    def state_file(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def live(self) -> Path:
        """The work dir a benchmark runs in (``history/``, ``lake/``)."""
        return self.folder / LIVE

    @property
    def pristine(self) -> Path:
        return self.folder / PRISTINE

    def state(self) -> LakeState | None:
        return read_state(self.state_file)


_locks: dict[Path, IO[str]] = {}


def hold_lock(folder: Path, progress: Progress) -> None:
    """Hold the lake's lock until this process exits: one builder or benchmark per lake."""
    if folder in _locks:
        return
    folder.mkdir(parents=True, exist_ok=True)
    handle = (folder / ".lock").open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        progress(f"waiting for another process using {folder}")
        fcntl.flock(handle, fcntl.LOCK_EX)
    _locks[folder] = handle


def current_commit() -> str | None:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return found.stdout.strip() or None


def ensure_lake(
    events: int,
    seed: int = 7,
    fmt: str | None = None,
    *,
    cache: Path | None = None,
    rebuild: bool = False,
    progress: Progress | None = None,
    builder: Callable[[CachedLake, LakeState, Progress], Stages] | None = None,
) -> CachedLake:
    """The cached lake of this size, seed and format: reused if finished, else built (or its
    build continued at the first stage not finished). Holds the lake's lock until exit.
    ``builder`` runs the stages (the product's, by default)."""
    say = progress or _stderr
    version = digest_sources(generator_sources())
    key = lake_key(version, seed, events, fmt)
    root = cache if cache is not None else cache_root(os.environ, Path.home())
    lake = CachedLake(root.expanduser().resolve() / key)
    hold_lock(lake.folder, say)
    expected = LakeState(key, events, seed, fmt, version, str(lake.live.resolve()), commit=current_commit())
    state = lake.state()
    reason = "--rebuild" if rebuild and state is not None else stale_reason(state, expected)
    if reason is not None:
        say(f"starting the lake over ({reason})")
        state = None
    if state is None:
        for folder in (lake.live, lake.pristine):
            shutil.rmtree(folder, ignore_errors=True)
        (lake.folder / PRISTINE_FILES).unlink(missing_ok=True)
        state = expected
        write_state(lake.state_file, state)
    todo = remaining(STAGES, state.done)
    if not todo:
        say(f"reusing the lake in {lake.folder} (built at {state.commit}, {state.generated_events} events)")
        return lake
    if state.done:
        say(
            f"continuing the build of {lake.folder} at {todo[0]} "
            f"({len(state.done)} of {len(STAGES)} stages done)"
        )
    else:
        say(f"building {lake.folder}")
    build(lake, todo, (builder or ProductStages)(lake, state, say), say)
    return lake


class Stages(Protocol):
    """What runs a build's stages: ``run`` one (it may add to ``state``), ``stop`` at the end."""

    state: LakeState

    def run(self, stage: str) -> None: ...

    def stop(self) -> None: ...


def build(lake: CachedLake, todo: Sequence[str], builder: Stages, say: Progress) -> None:
    """Run ``todo`` in order, writing the state after each stage, so a stopped build continues
    at the stage it stopped in."""
    started = time.monotonic()
    try:
        for number, stage in enumerate(todo, start=STAGES.index(todo[0]) + 1):
            say(f"[{number}/{len(STAGES)}] {stage} ...")
            began = time.monotonic()
            builder.run(stage)
            seconds = time.monotonic() - began
            builder.state = builder.state.with_stage(stage, seconds)
            write_state(lake.state_file, builder.state)
            say(f"[{number}/{len(STAGES)}] {stage} done in {seconds:.1f}s")
    finally:
        builder.stop()
    say(f"built {lake.folder} in {time.monotonic() - started:.1f}s ({builder.state.generated_events} events)")


class ProductStages:
    """Runs the stages through the product; the Spark session is started on first need."""

    def __init__(self, lake: CachedLake, state: LakeState, say: Progress) -> None:
        self.lake, self.state, self.say = lake, state, say
        self._opened: tuple[Any, Any, Any] | None = None

    def run(self, stage: str) -> None:
        if stage == "generate":
            self.generate()
        elif stage.startswith("ingest "):
            from workloads.pipeline import run_ingest

            registry, ledger, clock = self.open()
            report = run_ingest(
                registry, ledger, clock, feed=stage.split()[1], source=self.lake.live / "history"
            )
            self.say(
                f"    {len(report.ingested)} of {len(report.manifests)} deliveries new, "
                f"{report.rows_written} rows written"
            )
        elif stage == "silver":
            from workloads.gold.quality import medallion_gate
            from workloads.pipeline import run_silver
            from workloads.synthetic.generator import load_lateness_policy

            registry, ledger, clock = self.open()
            run_silver(registry, ledger, clock, policy=load_lateness_policy(), gate=medallion_gate)
        elif stage == "gold":
            from workloads.gold.quality import medallion_gate
            from workloads.pipeline import run_gold

            run_gold(*self.open(), gate=medallion_gate)
        elif stage == "pristine":
            self.stop()  # nothing open while the lake is copied
            self.keep_pristine()
        else:
            raise ValueError(f"unknown stage {stage!r}")

    def generate(self) -> None:
        from workloads.synthetic.generator import generate

        history = self.lake.live / "history"
        shutil.rmtree(history, ignore_errors=True)
        summary = generate(history, generator_settings(self.state.events, self.state.seed))
        self.state = replace(self.state, generated_events=summary.total_events)
        self.say(
            f"    {summary.total_events} events, {summary.files_written} files, {summary.persons} persons"
        )

    def open(self) -> tuple[Any, Any, Any]:
        if self._opened is None:
            from lakehouse.config import load_config
            from lakehouse.session import build_session
            from lakehouse.tables import TableRegistry
            from ledger import SystemClock, open_ledger
            from workloads.synthetic.demo import create_zones

            config = load_config(
                "conf/lakehouse.yaml", overrides=lake_overrides(self.lake.live, self.state.format)
            )
            registry = TableRegistry(build_session(config), config)
            clock = SystemClock()
            create_zones(registry, lambda _m: None)
            self._opened = (registry, open_ledger(registry, clock=clock), clock)
        return self._opened

    def stop(self) -> None:
        if self._opened is not None:
            self._opened[0].spark.stop()
            self._opened = None

    def keep_pristine(self) -> None:
        shutil.rmtree(self.lake.pristine, ignore_errors=True)
        linked, copied = copy_lake(self.lake.live, self.lake.pristine)
        (self.lake.folder / PRISTINE_FILES).write_text(
            json.dumps(listing(self.lake.pristine)), encoding="utf-8"
        )
        self.say(f"    {linked} files linked, {copied} copied")


def lake_overrides(live: Path, fmt: str | None) -> dict[str, Any]:
    """The configuration overrides of a lake in ``live`` (its ``lake/`` is the work dir)."""
    return {"workdir": str(live / "lake"), **({"force_format": fmt} if fmt else {})}


def checkout(lake: CachedLake, progress: Progress | None = None) -> Path:
    """``live/`` restored from ``pristine/`` (checked unchanged first): the work dir a
    benchmark may change. Returns it."""
    say = progress or _stderr
    recorded = json.loads((lake.folder / PRISTINE_FILES).read_text(encoding="utf-8"))
    changed = differences(recorded, listing(lake.pristine))
    if changed:
        raise SystemExit(
            f"the pristine copy of {lake.folder} changed ({len(changed)}: {', '.join(changed[:3])}); "
            "rebuild it: python -m benchmarks lake --rebuild ..."
        )
    started = time.monotonic()
    shutil.rmtree(lake.live, ignore_errors=True)
    linked, copied = copy_lake(lake.pristine, lake.live)
    say(
        f"restored {lake.live} from the pristine copy in {time.monotonic() - started:.1f}s "
        f"({linked} files linked, {copied} copied)"
    )
    return lake.live


# --- for the benchmarks ----------------------------------------------------------------------


def add_lake_arguments(parser: argparse.ArgumentParser, *, events: int | None = None) -> None:
    """``--events`` (the cached lake's size) and ``--seed``."""
    parser.add_argument("--events", type=int, default=events, help=EVENTS_HELP)
    _add_seed(parser)


def add_lake_choice(parser: argparse.ArgumentParser) -> None:
    """Either ``--lake DIR`` (a lakehouse work dir, measured as it is) or ``--events N`` (a
    fresh copy of the cached lake), and ``--seed``."""
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--lake", type=Path, help="work dir of a built lakehouse, measured as it is")
    group.add_argument("--events", type=int, help=EVENTS_HELP)
    _add_seed(parser)


def chosen_lake(args: argparse.Namespace, fmt: str | None = None) -> Path:
    """The lakehouse work dir ``add_lake_choice``'s arguments name."""
    return Path(args.lake) if args.lake is not None else cached_work_dir(args.events, args.seed, fmt) / "lake"


EVENTS_HELP = "approximate events of the cached lake (python -m benchmarks lake), built if missing"


def _add_seed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="the generator's seed of the cached lake")


def cached_work_dir(events: int, seed: int, fmt: str | None = None) -> Path:
    """A fresh copy of the cached lake (built first if missing), for a benchmark to run on:
    the work dir with ``history/`` and ``lake/``."""
    lake = ensure_lake(events, seed, fmt)
    live = checkout(lake)
    state = lake.state()
    print(f"on a copy of the cached lake: {live} ({state.generated_events if state else '?'} events)")
    return live


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks lake",
        description="Build the benchmark lake once (or continue its build), reuse it when finished.",
    )
    add_lake_arguments(parser, events=None)
    parser.add_argument("--format", choices=["delta", "iceberg"], help="one format for every zone")
    parser.add_argument("--rebuild", action="store_true", help="start over even if the lake is finished")
    parser.add_argument("--list", action="store_true", help="list the cached lakes and their stages")
    args = parser.parse_args(argv)
    if args.list:
        root = cache_root(os.environ, Path.home())
        for state_file in sorted(root.glob(f"*/{STATE_FILE}")):
            state = read_state(state_file)
            if state is not None:
                status = "finished" if state.finished else f"{len(state.done)} of {len(STAGES)} stages"
                print(
                    f"{state_file.parent}  {status}  {state.generated_events} events  commit {state.commit}"
                )
        return 0
    if args.events is None:
        parser.error("--events is required")
    started = time.monotonic()
    lake = ensure_lake(args.events, args.seed, args.format, rebuild=args.rebuild)
    state = lake.state()
    assert state is not None
    stages = ", ".join(f"{s} {state.seconds[s]}s" for s in STAGES if s in state.seconds)
    _stderr(f"ready in {time.monotonic() - started:.1f}s; the build's stages: {stages}")
    print(lake.folder)
    return 0


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
