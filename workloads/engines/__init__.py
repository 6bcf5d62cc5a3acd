"""Versioned engines: pieces of transformation logic with a declared ``name@version``.

An engine module exposes ``NAME``, one ``VERSION``-style constant per version it holds,
and pure functions ``DataFrame -> DataFrame`` per version (``resolve_v1``, ...). A new
version is added beside the old one, never in place, so that history built by the old
version can be rebuilt, compared and superseded (see docs/concepts.md).
"""
