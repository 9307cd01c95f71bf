"""How close accelsim's answers are to measurements: fits, cross-validation, calibration,
comparisons with published rows; and the command-line fuzz. See README.md."""
