"""Null-device tier: the pipeline and the device layer on the null device (fixed, known
costs)."""
