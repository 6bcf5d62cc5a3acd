"""Tools that build the documentation site's inputs: the executed notebooks
(:mod:`docs_tools.notebooks`) and the pinned mermaid build (:mod:`docs_tools.mermaid`).

Not part of the product (nothing in ``lakehouse``, ``ledger``, ``workloads`` or ``jobs``
imports them); run from the repository root, as ``make notebooks`` and ``make docs`` do.
"""
