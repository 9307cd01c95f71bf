"""SCALE-Sim's side of the systolic class: its `.cfg` file read as a profile (`config`) and its
three per-layer reports written from the SRAM model (`report`)."""
