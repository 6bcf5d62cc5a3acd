"""The ML users' workloads: point-in-time training sets (W4), training, and calibration (W5).

* :mod:`~workloads.ml.point_in_time`: the pure point-in-time rules (what a decision's row may see);
* :mod:`~workloads.ml.training_set`: the recorded build of ``gold.training_sets``;
* :mod:`~workloads.ml.tracking`: MLflow, embedded by default, tied to the ledger both ways.
"""
