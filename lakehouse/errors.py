"""The one exception hierarchy of lakehouse-replay.

Every error the toolkit raises on purpose derives from :class:`LakehouseError`. Each class
has a stable ``code`` so that scripts can react to it, and a message that says what was
wrong and what to do. Only ``jobs/`` turns these into one line on stderr and an exit code.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Root of every deliberate error of the toolkit."""

    code = "lakehouse_error"
    exit_code = 1


class ConfigError(LakehouseError, ValueError):
    """A configuration file, key, value or override is missing or wrong."""

    code = "config_error"
    exit_code = 2


class UsageError(LakehouseError, ValueError):
    """A command was given arguments it cannot act on."""

    code = "usage_error"
    exit_code = 2


class EnvironmentProblem(LakehouseError):
    """The machine lacks something the toolkit needs (Java, a jar, a writable folder)."""

    code = "environment_problem"
    exit_code = 3


class UnknownTableError(LakehouseError, KeyError):
    """A logical table name is not in the configuration."""

    code = "unknown_table"
    exit_code = 2

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


class ZonePolicyError(TableError):
    """An operation breaks a zone's rule (for example a delete on append-only Bronze)."""

    code = "zone_policy"


class CandidateError(TableError):
    """A candidate is missing, already published, or cannot be staged or published."""

    code = "candidate_error"


class DataQualityError(LakehouseError):
    """A quality gate failed; nothing was made visible."""

    code = "data_quality"
    exit_code = 4


class ConservationError(LakehouseError):
    """Records were lost or invented between zones."""

    code = "conservation"
    exit_code = 4


class IngestError(LakehouseError):
    """A delivery could not be ingested as it is."""

    code = "ingest_error"
    exit_code = 2
