"""`accelsim collective`: (being written)."""
