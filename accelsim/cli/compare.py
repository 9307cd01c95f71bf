"""`accelsim compare`: (being written)."""
