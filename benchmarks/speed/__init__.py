"""How fast accelsim runs: one script per command or engine; see README.md."""
