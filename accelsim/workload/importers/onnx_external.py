"""ONNX external data, read by accelsim rather than by `onnx` (`onnx_inputs.load_model`).

    inline_external_data(path, model)   # every external tensor's bytes, now inside `model`

A tensor stored outside the model file names a `location` relative to the model's folder, an
`offset` and a `length`. Whatever the installed onnx version does with them (onnx 1.15 follows
a symlink inside the folder to a file outside it), accelsim checks each entry itself before any
byte is read: the location must be a relative path without `..` whose real path (symlinks
resolved) stays inside the model's real folder, a regular file (`accelsim.tomlfiles`), and the
range must lie inside it and hold exactly the tensor's bytes. Anything else is an
AccelsimError naming the model, the tensor and why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np
import onnx
from onnx import helper

from accelsim.errors import AccelsimError
from accelsim.tomlfiles import open_input_file

# NB: the largest external data file read; far above any model accelsim costs (GPT-3 in fp32
# is 700 GB), low enough that a bogus length cannot ask for more.
MAX_EXTERNAL_BYTES = 1 << 40
_PACKED_4BIT = {getattr(onnx.TensorProto, name) for name in ("INT4", "UINT4", "FLOAT4E2M1")
                if hasattr(onnx.TensorProto, name)}


def inline_external_data(path: Path, model: onnx.ModelProto) -> None:
    """Read every external tensor of `model` (loaded from `path` without its external data)
    from inside the model's folder into the tensor itself; AccelsimError (one line) if any
    reference leaves the folder or does not fit its file."""
    tensors = [t for t in _tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]
    if not tensors:
        return
    folder = path.resolve().parent
    for t in tensors:
        entries = {e.key: e.value for e in t.external_data}
        location = _confined(path, folder, t.name, entries.get("location", ""))
        offset = _whole(path, t.name, "offset", entries.get("offset", "0"))
        length = entries.get("length")
        fd = open_input_file(location, MAX_EXTERNAL_BYTES)
        try:
            size_bytes = os.fstat(fd).st_size
            n = size_bytes - offset if length is None else _whole(path, t.name, "length", length)
            expected = _tensor_bytes(t)
            if expected is not None and n != expected:
                raise AccelsimError(f"{path}: tensor '{t.name}' has {n:,} bytes of external data"
                                    f"; its shape {list(t.dims)} needs {expected:,}")
            if offset + n > size_bytes or n < 0:
                raise AccelsimError(f"{path}: tensor '{t.name}' external data (offset {offset:,}"
                                    f", {n:,} bytes) runs past the end of "
                                    f"'{entries['location']}' ({size_bytes:,} bytes)")
            data = os.pread(fd, n, offset)
        except OSError as err:
            raise AccelsimError(f"{path}: cannot read the external data of tensor '{t.name}':"
                                f" {err.strerror or err}") from None
        finally:
            os.close(fd)
        if len(data) != n:
            raise AccelsimError(f"{path}: tensor '{t.name}' external data is cut short")
        t.raw_data = data
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _confined(path: Path, folder: Path, tensor: str, location: str) -> Path:
    """The file `location` names, if it is a relative path that stays inside `folder`."""
    def bad(why: str) -> AccelsimError:
        return AccelsimError(f"{path}: tensor '{tensor}' external data location "
                             f"{location[:200]!r} {why}; external data must be a file inside "
                             "the model's folder")

    if not location or "\x00" in location:
        raise bad("is empty or not a file name")
    if (PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute()
            or PureWindowsPath(location).drive):
        raise bad("is an absolute path")
    parts = PureWindowsPath(location).parts  # splits on / and \ alike
    if ".." in parts:
        raise bad("climbs out with '..'")
    try:
        real = (folder / location).resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop
        raise bad(f"cannot be resolved ({err})") from None
    if not real.is_relative_to(folder):
        raise bad("resolves (through a symlink) outside the model's folder")
    return real


def _whole(path: Path, tensor: str, key: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        raise AccelsimError(f"{path}: tensor '{tensor}' external data {key} {text[:40]!r} is "
                            "not a whole number of bytes")
    return int(text)


def _tensor_bytes(t: onnx.TensorProto) -> int | None:
    """The bytes of a tensor of `t`'s shape and type, where they are fixed (None otherwise)."""
    count = int(np.prod(t.dims, dtype=object)) if t.dims else 1
    if t.data_type in _PACKED_4BIT:
        return (count + 1) // 2
    try:
        itemsize = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, TypeError, ValueError):
        return None
    return count * itemsize if t.data_type != onnx.TensorProto.STRING else None


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor in the model: initialisers, sparse ones and attributes, in subgraphs and
    functions too."""
    for f in model.functions:
        for n in f.node:
            yield from _node_tensors(n)
    yield from _graph_tensors(model.graph)


def _graph_tensors(g: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from g.initializer
    for s in g.sparse_initializer:
        yield s.values
        yield s.indices
    for n in g.node:
        yield from _node_tensors(n)


def _node_tensors(n: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for a in n.attribute:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.HasField("sparse_tensor"):
            yield a.sparse_tensor.values
            yield a.sparse_tensor.indices
        if a.HasField("g"):
            yield from _graph_tensors(a.g)
        for sub in a.graphs:
            yield from _graph_tensors(sub)
