"""Throwaway services the tests and demos start on this machine (not part of the product):
a Spark standalone master and worker, a PostgreSQL server.

Nothing in ``lakehouse``, ``ledger``, ``workloads`` or ``jobs`` imports this package
(``tests/test_layers.py`` checks it), and the distributable does not ship it: it exists so
that ``make test`` and the cluster demo can run the product against real servers on loopback.
"""
