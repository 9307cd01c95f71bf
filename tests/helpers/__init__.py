"""What several test files share that is not a fixture (fixtures: tests/conftest.py): paths,
the in-process command-line runner, the pipeline's "infinitely fast" parts, ONNX model
builders, the report page parser, and the pieces of benchmark logic the guards need (copied
here: no test imports from benchmarks/)."""
