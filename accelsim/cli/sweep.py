"""`accelsim sweep`: (being written)."""
