"""Properties tier: hypothesis-based property tests (fuzzing included)."""
