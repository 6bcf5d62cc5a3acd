"""The ML users' workloads: point-in-time training sets (W4), the fraud model, calibration (W5).

* :mod:`~workloads.ml.point_in_time`: the pure point-in-time rules (what a decision's row may see);
* :mod:`~workloads.ml.training_set`: the recorded build of ``gold.training_sets``;
* :mod:`~workloads.ml.model` and :mod:`~workloads.ml.training`: the fraud model, its honest
  measures, and the recorded, registered training run;
* :mod:`~workloads.ml.correlation_outcomes`: what counts as a correlation's outcome (once);
* :mod:`~workloads.ml.calibrate`: a release's calibration against later outcomes, and the
  recalibrated release it can declare;
* :mod:`~workloads.ml.calibration_at`: which calibration was in force at T, and what it measured;
* :mod:`~workloads.ml.tracking`: MLflow, embedded by default, tied to the ledger both ways.
"""
