"""Routine maintenance as a recorded run: retention per zone and compaction, never against
what the ledger protects, an open candidate needs or a legal hold keeps (``lakehouse maintain``)."""

from workloads.maintenance.maintain import MaintenanceReport, TableMaintenance, maintain
from workloads.maintenance.plan import Guard, TableDecision, TableFacts, decide

__all__ = [
    "Guard",
    "MaintenanceReport",
    "TableDecision",
    "TableFacts",
    "TableMaintenance",
    "decide",
    "maintain",
]
