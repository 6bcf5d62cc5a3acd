"""Reconciliation as a component (seed 002): a derived store against its source.

:mod:`~workloads.reconciliation.pairs` declares which store derives from which (authority,
key, projection, repair); :mod:`~workloads.reconciliation.summaries` holds the pure rules
(key-hash ranges, the bounded walk's decisions and loop, the budgets, the step change, the
rate limit);
:mod:`~workloads.reconciliation.compare` the Spark side; :mod:`~workloads.reconciliation.run`
the recorded run (lock, bounded mode, staleness, repair, report).
"""
