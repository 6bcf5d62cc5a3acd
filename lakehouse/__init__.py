"""Storage layer of lakehouse-replay: config, Spark session, tables over Delta and Iceberg.

This package imports nothing else of the project (layers: jobs -> workloads -> ledger -> lakehouse).
"""

__version__ = "0.1.0"
