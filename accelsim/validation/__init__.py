"""Validate the model against a user's own measurements, and calibrate to them
(`accelsim validate`): `measurements` reads the rows, `run` predicts and fits them."""
