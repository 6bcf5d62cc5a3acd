"""Throwaway services the tests and demos start on this machine (not part of the product).

Nothing in ``lakehouse``, ``ledger``, ``workloads`` or ``jobs`` imports this package, and the
distributable does not ship it: it exists so that ``make test`` and the cluster demo can run
the product against real servers (a PostgreSQL Iceberg catalog) on loopback.
"""
