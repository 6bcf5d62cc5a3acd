"""Seeds derived from the master seed: the generator's only source of randomness.

Every ``random.Random`` the generator uses is seeded by :func:`sub_seed` with a label (one
per person, per generated day, per delivery), so the same settings give the same bytes in
any process, whatever ``PYTHONHASHSEED`` is.
"""

from __future__ import annotations

import hashlib


def sub_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed derived from the master seed and a label; stable across processes."""
    text = "|".join([str(seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
