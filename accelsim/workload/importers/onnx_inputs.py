"""Load an ONNX model file and fix its input dimensions (`accelsim.workload.importers.onnx`).

- `load_model`: read and check the file (one-line AccelsimError naming it and why).
- `resolve_inputs`: dimension 0 of every input is the batch; other symbolic dimensions are a
  sequence length (`seq_len`) or an image size (`image_size`), by name or place, set from the
  knobs or their defaults in `KNOBS`; any other symbolic dimension is an error.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from accelsim.errors import AccelsimError
from accelsim.workload.ops import Shape

# Input knobs: symbolic dimensions other than the batch, and their defaults (those of the zoo).
KNOBS: dict[str, int] = {"seq_len": 128, "image_size": 224}
_SEQ_WORDS = ("seq", "len", "token", "time", "step", "sentence", "word")
_IMAGE_WORDS = ("height", "width", "size", "image")
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}
_TWO_GB = 2**31


def first_line(err: BaseException) -> str:
    """The first line of an error's text (its type where it has none), at most 300 chars."""
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]


def load_model(path: Path) -> onnx.ModelProto:
    """The checked model at `path`; AccelsimError (one line) naming the file and why not."""
    if path.is_dir():
        raise AccelsimError(f"{path}: is a directory, not an ONNX model file")
    try:
        model = onnx.load(str(path))
    except DecodeError as err:
        raise AccelsimError(f"{path}: not an ONNX model (protobuf: {first_line(err)})") from None
    except (OSError, ValueError, RuntimeError) as err:
        raise AccelsimError(f"{path}: cannot read the ONNX model: {first_line(err)}") from None
    if not model.graph.node:
        raise AccelsimError(f"{path}: not an ONNX model (no graph nodes in it)")
    try:
        onnx.checker.check_model(model if model.ByteSize() < _TWO_GB else str(path))
    except (onnx.checker.ValidationError, ValueError) as err:
        raise AccelsimError(f"{path}: invalid ONNX model: {first_line(err)}") from None
    return model


def _dim_knob(input_rank: int, pos: int, param: str, is_float: bool) -> str | None:
    """Which knob sets a symbolic dimension (not the batch): by its name, else its place."""
    low = param.lower()
    if any(w in low for w in _SEQ_WORDS):
        return "seq_len"
    if any(w in low for w in _IMAGE_WORDS) or low in ("h", "w"):
        return "image_size"
    if is_float and input_rank in (4, 5) and pos >= 2:
        return "image_size"  # (N, C, H, W) or (N, C, D, H, W)
    if input_rank in (2, 3) and pos == 1:
        return "seq_len"  # (N, S) token ids or (N, S, D) hidden states
    return None


def resolve_inputs(path: Path, model: onnx.ModelProto, knobs: dict[str, int]
                    ) -> tuple[int, list[tuple[str, Shape, str]]]:
    """Fix every input dimension in `model` (in place): the batch and the knobs' dimensions.
    Returns the batch used for inference and the inputs as (name, full shape, dtype)."""
    inits = {t.name for t in model.graph.initializer}
    real = [v for v in model.graph.input if v.name not in inits]
    fixed_batches = set()
    for v in real:
        if not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
            raise AccelsimError(f"{path}: input '{v.name}' is not a tensor of known rank")
        dims = v.type.tensor_type.shape.dim
        if not dims:
            raise AccelsimError(f"{path}: input '{v.name}' is a scalar: it has no batch "
                                "dimension (accelsim reads batch-first models)")
        if dims[0].HasField("dim_value") and dims[0].dim_value > 0:
            fixed_batches.add(dims[0].dim_value)
    if len(fixed_batches) > 1:
        raise AccelsimError(f"{path}: inputs have different fixed batch sizes "
                            f"{sorted(fixed_batches)}")
    # NB: a symbolic batch is inferred at 1; the per-sample graph does not depend on it.
    batch = fixed_batches.pop() if fixed_batches else 1
    used: set[str] = set()
    out = []
    for v in real:
        tt = v.type.tensor_type
        is_float = tt.elem_type in _FLOAT_TYPES
        dims = tt.shape.dim
        full = [batch]
        dims[0].dim_value = batch
        for pos in range(1, len(dims)):
            d = dims[pos]
            if d.HasField("dim_value") and d.dim_value > 0:
                full.append(d.dim_value)
                continue
            knob = _dim_knob(len(dims), pos, d.dim_param, is_float)
            if knob is None:
                raise AccelsimError(
                    f"{path}: input '{v.name}' dimension {pos} ('{d.dim_param or '?'}') is "
                    "symbolic; accelsim sets the batch (dimension 0: --batch), a sequence "
                    "length (--seq-len) and an image size (--image-size), not this one: export "
                    "the model with it fixed")
            used.add(knob)
            d.dim_value = knobs.get(knob, KNOBS[knob])  # NB: H and W alike: square images
            full.append(d.dim_value)
        out.append((v.name, tuple(full), "float" if is_float else "index"))
    unused = sorted(set(knobs) - used)
    if unused:
        shapes = ", ".join(f"{n} {s[1:]}" for n, s, _ in out)
        raise AccelsimError(f"{path}: {', '.join(unused)} given, but the model has no symbolic "
                            f"dimension it sets (per-sample inputs: {shapes})")
    return batch, out
