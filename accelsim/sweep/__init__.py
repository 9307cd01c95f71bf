"""Many simulations at once: `compare` (one row per device) and `sweep` (a grid of knobs)."""
