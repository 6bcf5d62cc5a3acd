"""Identifiers in raw text, as Spark columns: the tokens an address or an id can be, and their
salted digests.

Raw text (a delivered line, a held record, a notification payload) is cut into tokens at
every character an email address or an id cannot hold, lower-cased, with the dots that end
a sentence stripped. Whole tokens are compared, so ``alice@x.com`` never matches
``malice@x.com``. A salted digest (``sha256(salt + "\\x1f" + token)``) lets a caller look
for identifiers it only knows by digest, as an erasure certificate keeps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column

IDENTIFIER_SEPARATORS: Final = r"[^a-z0-9._%+@\-]+"
"""A regular expression for what separates identifiers in lower-cased text."""

DIGEST_JOIN: Final = "\x1f"
"""Between the salt and the token in a salted digest."""


def identifier_tokens(text: Column) -> Column:
    """The tokens of a text column: lower-cased, cut at separators, outer dots stripped, no
    empty token."""
    from pyspark.sql import functions as F

    parts = F.split(F.lower(text), IDENTIFIER_SEPARATORS)
    stripped = F.transform(parts, lambda part: F.regexp_replace(part, r"^\.+|\.+$", ""))
    return F.filter(stripped, lambda token: token != F.lit(""))


def salted_digests(tokens: Column, salt: str) -> Column:
    """The salted sha256 (hex) of each token of an array column; the salt is bound as a value."""
    from pyspark.sql import functions as F

    return F.transform(tokens, lambda token: F.sha2(F.concat(F.lit(salt + DIGEST_JOIN), token), 256))
