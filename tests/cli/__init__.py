"""CLI tier: the command line and the Python front door, bad input on the command line,
reports."""
