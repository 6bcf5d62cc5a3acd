"""The one exception hierarchy of lakehouse-replay.

Every error the toolkit raises on purpose derives from :class:`LakehouseError`. Each class
has a stable ``code`` so that scripts can react to it, and a message that says what was
wrong and what to do. Only ``jobs/`` turns these into one line on stderr and an exit code.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every ``lakehouse`` command, one meaning each: the single source of
    the documented table in docs/reference/exit-codes.md (:data:`EXIT_CODE_MEANINGS`, checked by a test)."""

    DONE = 0
    FAILED = 1
    BAD_INPUT = 2
    ENVIRONMENT = 3
    CHECK_FAILED = 4
    HELD = 5
    INJECTED_FAILURE = 6
    ROUTES_DISAGREE = 7
    INTERRUPTED = 130


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.DONE: "done",
    ExitCode.FAILED: "failed: a run error (the ledger records it), or an unexpected error",
    ExitCode.BAD_INPUT: (
        "bad input or configuration: one line names the flag, file, key, table or run id; an "
        "erasure of a subject under a legal hold (`erase`) names the hold"
    ),
    ExitCode.ENVIRONMENT: (
        "environment problem (Java, jars, an unreachable Spark master, the Iceberg catalog's "
        "PostgreSQL server down or refusing the credentials)"
    ),
    ExitCode.CHECK_FAILED: (
        "a check found a problem: a quality gate, conservation, the ledger's integrity or history "
        "(`ledger verify [--history]`), an entity index, an erasure's verification (`erase`, "
        "`erase --verify`), a publication that serving no longer matches (`verify-publication`: "
        "verdict rollback), an engine's code against its fingerprint (`engines list`, `engines check`), a "
        "stalled feed (`progress`), streaming precision below its threshold (`divergence`), a "
        "table version no run produced (`ledger lineage`), differences between a declared pair "
        "(`reconcile`)"
    ),
    ExitCode.HELD: (
        "held, not refused for good: a required consumer has not acknowledged (`publish`), or a "
        "`reconcile` is not finished (a budget stopped it, or another reconcile holds the pair: "
        "run it again)"
    ),
    ExitCode.INJECTED_FAILURE: "an injected failure (tests and drills; `stream --fail-at`)",
    ExitCode.ROUTES_DISAGREE: "`asof`, `extract`: the two routes disagree",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
"""What each exit code means, as the documented table (docs/reference/exit-codes.md) says it."""


class LakehouseError(Exception):
    """Root of every deliberate error of the toolkit."""

    code = "lakehouse_error"
    exit_code: int = ExitCode.FAILED


class ConfigError(LakehouseError, ValueError):
    """A configuration file, key, value or override is missing or wrong."""

    code = "config_error"
    exit_code = ExitCode.BAD_INPUT


class UsageError(LakehouseError, ValueError):
    """A command was given arguments it cannot act on."""

    code = "usage_error"
    exit_code = ExitCode.BAD_INPUT


class EnvironmentProblem(LakehouseError):
    """The machine lacks something the toolkit needs (Java, a jar, a writable folder)."""

    code = "environment_problem"
    exit_code = ExitCode.ENVIRONMENT


class CatalogUnreachableError(EnvironmentProblem):
    """The Iceberg catalog's server (PostgreSQL) cannot be reached or refuses the credentials."""

    code = "catalog_unreachable"


class UnknownTableError(LakehouseError, KeyError):
    """A logical table name is not in the configuration."""

    code = "unknown_table"
    exit_code = ExitCode.BAD_INPUT

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else self.code


class TableError(LakehouseError):
    """A table operation could not be carried out."""

    code = "table_error"


class TableExistsError(TableError):
    """A table was to be created where one already exists."""

    code = "table_exists"


class TableMissingError(TableError):
    """A table was used before it was created."""

    code = "table_missing"


class VersionNotFoundError(TableError, LookupError):
    """A version, snapshot or timestamp does not name a state of the table."""

    code = "version_not_found"


class VersionGoneError(TableError, LookupError):
    """A version the ledger names is no longer in the format's history (expired or vacuumed)."""

    code = "version_gone"


class ZonePolicyError(TableError):
    """An operation breaks a zone's rule (for example a delete on append-only Bronze)."""

    code = "zone_policy"


class CandidateError(TableError):
    """A candidate is missing, already published, or cannot be staged or published."""

    code = "candidate_error"


class DataQualityError(LakehouseError):
    """A quality gate failed; nothing was made visible.

    The message quotes failing rows for the person who runs the command; ``recorded`` is the
    same without any row value, for the ledger (immutable: a value there could never be
    erased)."""

    code = "data_quality"
    exit_code = ExitCode.CHECK_FAILED

    def __init__(self, message: str, *, recorded: str | None = None) -> None:
        super().__init__(message)
        self.recorded = recorded


class IndexMismatchError(LakehouseError):
    """A derived index does not mirror the table it was built from; it was not recorded."""

    code = "index_mismatch"
    exit_code = ExitCode.CHECK_FAILED


class ConservationError(LakehouseError):
    """Records were lost or invented between zones."""

    code = "conservation"
    exit_code = ExitCode.CHECK_FAILED


class IngestError(LakehouseError):
    """A delivery could not be ingested as it is."""

    code = "ingest_error"
    exit_code = ExitCode.BAD_INPUT


class LedgerError(LakehouseError):
    """The provenance ledger could not be read, written or upgraded."""

    code = "ledger_error"


class LedgerConflictError(LedgerError):
    """Other writers kept appending to the ledger; this append gave up after its retries."""

    code = "ledger_conflict"


class LedgerIntegrityError(LedgerError):
    """The ledger's hash chain is broken or forked (edited, deleted, inserted or reordered)."""

    code = "ledger_integrity"
    exit_code = ExitCode.CHECK_FAILED


class LedgerSchemaError(LedgerError):
    """The ledger table's schema version is not the one this code writes."""

    code = "ledger_schema"
    exit_code = ExitCode.BAD_INPUT


class EngineError(LakehouseError):
    """An engine declaration cannot be found, resolved or fingerprinted."""

    code = "engine_error"
    exit_code = ExitCode.BAD_INPUT


class UnknownEngineError(EngineError, LookupError):
    """No declared engine (version) matches the name, version or date asked for."""

    code = "unknown_engine"


class EngineFingerprintError(EngineError):
    """An engine's code differs from the fingerprint declared for its version."""

    code = "engine_fingerprint"


class GraphError(LakehouseError):
    """A graph algorithm did not reach its answer within its bound of rounds or iterations."""

    code = "graph_error"


class GraphParameterError(GraphError, ValueError):
    """A graph algorithm was given a parameter it cannot use (a damping outside 0..1, ...)."""

    code = "graph_parameter"
    exit_code = ExitCode.BAD_INPUT


class ReplayError(LakehouseError):
    """A replay could not be scoped, built, published or rolled back as asked."""

    code = "replay_error"


class UnknownRunError(ReplayError, LookupError):
    """A run id names no run in the ledger: bad input (exit 2), like an unknown table."""

    code = "unknown_run"
    exit_code = ExitCode.BAD_INPUT


class ReplayRefusedError(ReplayError):
    """A replay step was refused by a rule (purpose, approval, verdict, I/O cap, rollback window)."""

    code = "replay_refused"
    exit_code = ExitCode.BAD_INPUT


class PinnedInputGoneError(ReplayRefusedError):
    """A run cannot resume: maintenance removed a version it pinned (``--rebuild`` pins afresh)."""

    code = "pinned_input_gone"


class PublicationHeldError(ReplayError):
    """Publication waits for a required consumer's acknowledgement; nothing was published."""

    code = "publication_held"
    exit_code = ExitCode.HELD


class InjectedFailure(ReplayError):
    """A failure injected on purpose at a named step of a replay or an erasure (tests and recovery drills)."""

    code = "injected_failure"
    exit_code = ExitCode.INJECTED_FAILURE


class LegalHoldError(LakehouseError):
    """A legal hold covers what was asked for (a subject's erasure); nothing was changed.
    Exit 2: the request is refused as asked, naming the hold; it can be asked again once the
    hold is released (``lakehouse hold release``)."""

    code = "legal_hold"
    exit_code = ExitCode.BAD_INPUT


class ReconcileBusyError(LakehouseError):
    """Another reconcile holds the derived table (``lakehouse reconcile``); this one stopped
    before reading anything. Exit 5: not now, run it again when the other has finished."""

    code = "reconcile_busy"
    exit_code = ExitCode.HELD
