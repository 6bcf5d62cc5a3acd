"""Repeatable performance runs that print ratios against a baseline run in the same process."""
