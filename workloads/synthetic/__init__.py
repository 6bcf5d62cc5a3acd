"""Synthetic feeds with a ground truth, and the demo story told on them.

Test and demo data only: no production package imports this one (tests/test_layers.py).
"""
