"""`accelsim report`: (being written)."""
