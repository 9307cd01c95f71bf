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
from accelsim.physical import MAX_INPUT
from accelsim.tomlfiles import read_file_bytes
from accelsim.workload.importers.onnx_external import inline_external_data
from accelsim.workload.ops import Shape

# Input knobs: symbolic dimensions other than the batch, and their defaults (those of the zoo).
KNOBS: dict[str, int] = {"seq_len": 128, "image_size": 224}
_SEQ_WORDS = ("seq", "len", "token", "time", "step", "sentence", "word")
_IMAGE_WORDS = ("height", "width", "size", "image")
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}
_TWO_GB = 2**31
# NB: the oldest opset read: opsets 1 to 6 predate the broadcasting and attribute forms
# that the mappers (`onnx_nodes`) read.
_OLDEST_OPSET = 7
# NB: a sample's input of 2^36 elements (256 GiB in fp32): far past any real input; beyond,
# the costs overflow.
_MAX_INPUT_ELEMENTS = 1 << 36


def first_line(err: BaseException) -> str:
    """The first line of an error's text (its type where it has none), at most 300 chars."""
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0][:300]


def load_model(path: Path) -> onnx.ModelProto:
    """The checked model at `path`; AccelsimError (one line) naming the file and why not. The
    file is read by accelsim's reader (a regular file, at most 2 GiB: protobuf's limit) and
    its external data by `onnx_external` (confined to the model's folder), never by onnx."""
    data = read_file_bytes(path, _TWO_GB - 1)
    try:
        model = onnx.load_model_from_string(data)
    except DecodeError as err:
        raise AccelsimError(f"{path}: not an ONNX model (protobuf: {first_line(err)})") from None
    except (OSError, ValueError, RuntimeError) as err:
        raise AccelsimError(f"{path}: cannot read the ONNX model: {first_line(err)}") from None
    if not model.graph.node:
        raise AccelsimError(f"{path}: not an ONNX model (no graph nodes in it)")
    _check_opset(path, model)
    _check_physical(path, model)
    inline_external_data(path, model)
    try:
        # NB: a model past protobuf's 2 GiB is checked from its (real) path, where onnx reads
        # the external data again: only after `onnx_external` confined every reference.
        onnx.checker.check_model(model if model.ByteSize() < _TWO_GB else str(path.resolve()))
    except (onnx.checker.ValidationError, ValueError) as err:
        raise AccelsimError(f"{path}: invalid ONNX model: {first_line(err)}") from None
    return model


def _check_opset(path: Path, model: onnx.ModelProto) -> None:
    """The default-domain opset must be one the installed onnx knows (1 is older than any op
    accelsim maps; past the newest is a version onnx cannot check)."""
    newest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and not _OLDEST_OPSET <= o.version <= newest:
            raise AccelsimError(f"{path}: opset {o.version} is outside the range the installed "
                                f"onnx supports for accelsim ({_OLDEST_OPSET} to {newest})")


# Node attributes that are counts of at least one, or of at least zero (ONNX's checker takes
# any integer).
_POSITIVE_ATTRS = ("strides", "dilations", "kernel_shape", "group")
_NONNEGATIVE_ATTRS = ("pads", "output_padding")


def _check_physical(path: Path, model: onnx.ModelProto) -> None:
    """Refuse what no real network has: a stride, dilation, kernel or group below 1, a
    negative padding, an input dimension of 0 or less, an initialiser of negative dimension."""
    g = model.graph
    for n in g.node:
        for a in n.attribute:
            if a.name not in _POSITIVE_ATTRS + _NONNEGATIVE_ATTRS:
                continue
            values = list(a.ints) if a.ints else [a.i]
            low = 1 if a.name in _POSITIVE_ATTRS else 0
            if any(v < low for v in values):
                raise AccelsimError(f"{path}: node '{n.name or (n.output or ['?'])[0]}' "
                                    f"({n.op_type}) has {a.name} {values[:8]}: each must be "
                                    f"at least {low}")
    for v in g.input:
        if not v.type.HasField("tensor_type") or not v.type.tensor_type.HasField("shape"):
            continue
        elements = 1
        for pos, d in enumerate(v.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and not 1 <= d.dim_value <= MAX_INPUT:
                raise AccelsimError(f"{path}: input '{v.name}' dimension {pos} is "
                                    f"{d.dim_value}: a dimension is from 1 to {MAX_INPUT:,}")
            elements *= d.dim_value if d.HasField("dim_value") and pos else 1
        if elements > _MAX_INPUT_ELEMENTS:
            raise AccelsimError(f"{path}: input '{v.name}' holds {elements:.3g} elements per "
                                f"sample; at most {_MAX_INPUT_ELEMENTS:.3g}")
    for t in g.initializer:
        if any(d < 0 for d in t.dims):
            raise AccelsimError(f"{path}: initialiser '{t.name}' has a negative dimension "
                                f"{list(t.dims)[:8]}")


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
