"""Keeping a run inside its window: token estimates, calibration, pruning, compaction, integrity."""
