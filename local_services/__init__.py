"""Throwaway services on this machine for the demos and tests: a Spark standalone cluster,
a PostgreSQL server. Not part of the product: ``lakehouse``, ``ledger``, ``workloads`` and
``jobs`` never import this package, and it is not in the distributable."""
