"""Validation tier: closed forms, queueing theory, published counts, the measured results of
tests/reference and SCALE-Sim parity."""
