"""Figures, drawn only from DataFrames (the results of simulate, compare and sweep).

One module per figure family: `compare` (grouped bars), `roofline`, `sweep` (curves against a
knob), `timeline` (Gantt of event records), `breakdown` (stalls, energy). `style` holds the
shared pieces: the non-interactive backend, metric labels with units, atomic saving.
"""
