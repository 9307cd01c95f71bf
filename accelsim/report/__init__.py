"""Self-contained HTML reports of one simulation."""
