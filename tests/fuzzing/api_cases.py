"""Fuzz cases for the Python API (issue 24 items 3 and 8): calls of `accelsim.simulate`,
`compare`, `sweep`, `write_report`, `Result.write_trace`, the plans (`make_plan`,
`make_serving_plan`) and the profile loaders, each a good small call damaged by one or two
mutations: a wrong type where a name, number or path is expected, an unknown or misspelled
keyword, a number out of range, conflicting knobs; or a good call made with `pathlib.Path`
objects wherever a path is taken (`must_answer`: it has to simply work).

    case = api_case(RandomPicker(random.Random(5)))
    case.reproducer()   # "accelsim.simulate('mlp', hw='t4', batch=nan)"
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelsim.datafiles import builtin_files, data_root
from accelsim.sim.knobs import KNOBS

from .cases import DIR
from .mutate import Picker

ENTRIES = ("simulate", "simulate", "simulate", "simulate", "compare", "compare", "sweep",
           "sweep", "write_report", "write_trace", "make_plan", "make_serving_plan",
           "make_train_plan", "load_profile", "load_system")
NAN, INF = float("nan"), float("inf")


@dataclass(frozen=True)
class At:
    """A path inside the case's folder, filled in when the case runs (`text`: as a str)."""

    name: str
    text: bool = False

    def __repr__(self) -> str:
        where = f"{DIR}/{self.name}"
        return repr(where) if self.text else f"Path({where!r})"


# Wrong values where a name, a path, a number or a flag is expected.
# (inside the case's folder: a writer that makes the missing folders writes nothing outside)
MISSING = At("missing/x.toml")
BAD_ANY: tuple[Any, ...] = (
    0, 7, -1, 1.5, NAN, INF, None, [], ["t4"], (), {}, {"a": 1}, b"t4", True, False, 1j,
    {1}, MISSING, At("adir"), At("junk.toml"), At("junk.toml", True), At("junk.toml/x.toml"),
    "x" * 5000, "t4\x00",
    "t4\nx", "", " ", "T4", "t4 ", "../t4", "\ud800", np.int64(8), np.float64(1.0))
BAD_NUMBERS: tuple[Any, ...] = (
    0, -1, -0.0, 1e308, -1e308, 10**30, 2**63, 2**31, NAN, INF, -INF, 5e-324, 0.5, 1.5,
    True, False, "8", "nan", "1e3", " 8 ", "", None, [1], [], b"8", 1j, {}, np.int64(8),
    np.float64(2.0), np.nan, "9" * 400, "1\n2", MISSING)


@dataclass
class ApiCase:
    """One call: `entry` (a name of ENTRIES), its positional `args` and keyword `kwargs`
    (`At` values are paths in the case's folder), the files it reads there. `must_answer`:
    a good call (Paths where paths are taken) that must return a result."""

    entry: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)
    runs: int = 1
    must_answer: bool = False
    note: str = ""
    kind: str = "api"
    damaged: tuple[str, ...] = ()

    def call(self, folder: Path) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """args and kwargs with the folder filled in."""
        return (tuple(_fill(a, folder) for a in self.args),
                {k: _fill(v, folder) for k, v in self.kwargs.items()})

    def reproducer(self) -> str:
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" if k.isidentifier()
                                                  else f"**{{{k!r}: {_short(v)}}}"
                                                  for k, v in self.kwargs.items()]
        where = "accelsim." if self.entry in ("simulate", "compare", "sweep",
                                              "write_report") else ""
        call = f"{where}{self.entry}({', '.join(parts)})"
        return call + (f"   # {self.note}" if self.note else "")


def _fill(value: Any, folder: Path) -> Any:
    if isinstance(value, At):
        path = folder / value.name
        return str(path) if value.text else path
    if isinstance(value, list | tuple):
        return type(value)(_fill(v, folder) for v in value)
    return value


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:1]!r} * {len(value)}" if len(set(value)) == 1 else repr(value[:40])
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list | tuple):
        inner = ", ".join(_short(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' * (len(value) == 1)})"
    if isinstance(value, np.generic):
        return f"np.{type(value).__name__}({value.item()!r})"
    return repr(value)


def _file(folder: str, pattern: str, name: str) -> bytes:
    return builtin_files(folder, pattern)[name].read_bytes()


def _files() -> dict[str, bytes]:
    """The files every case's folder has: good copies of built-in data, and junk."""
    trace = b"arrival_s,prompt_tokens,output_tokens\n0,32,4\n0.1,16,4\n0.5,64,2\n"
    return {"dev.toml": _file("hw_profiles", "devices/*.toml", "t4"),
            "sys.toml": _file("hw_profiles", "systems/*.toml", "workstation"),
            "sc.toml": _file("workloads", "*.toml", "resnet50-infer"),
            "ds.toml": _file("hw_profiles", "datasets/*.toml", "synthetic-small"),
            "st.toml": _file("hw_profiles", "storage/*.toml", "nvme-gen4"),
            "m.json": (data_root("workloads") / "llm" / "gpt2.json").read_bytes(),
            "trace.csv": trace, "lens.txt": b"32\n64\n128\n",
            "junk.toml": b"[[[not toml\x00\xff"}


def _base(picker: Picker, entry: str) -> tuple[tuple[Any, ...], dict[str, Any], str]:
    """A good, small call of `entry` and its mode ("infer", "train", "serve", "llm", "-")."""
    if entry == "simulate":
        mode = picker.choice(("infer", "infer", "train", "serve", "llm", "llm-serve",
                              "federated"))
        if mode == "llm-serve":
            return ("gpt2",), dict(hw="a100", mode="serve", rate=5.0, requests=20,
                                   prompt_tokens=16, output_tokens=4), mode
        if mode == "federated":
            return ("mlp",), dict(hw="raspberry-pi-5", mode="federated", population=10,
                                  clients_per_round=2, rounds=2, local_steps=2), mode
        if mode == "train":
            return (picker.choice(("mlp", "resnet18", "resnet50-train")),), dict(
                hw=picker.choice(("workstation", "dgx-a100", "t4")), mode="train",
                steps=picker.integer(1, 3)), mode
        if mode == "serve":
            return ("mlp",), dict(hw="t4", mode="serve", rate=100.0, requests=50), mode
        if mode == "llm":
            return ("gpt2",), dict(hw="a100", batch=1, prompt_tokens=16, output_tokens=4), mode
        return (picker.choice(("mlp", "resnet18", "lstm", "bert_base")),), dict(
            hw=picker.choice(("t4", "a100", "tpu-v3", "edge-tpu"))), mode
    if entry == "compare":
        return ("mlp",), dict(hw=picker.choice((["t4", "a100"], "t4,edge-tpu", ("t4",)))), "infer"
    if entry == "sweep":
        return ("mlp",), dict(hw="t4", batch=[1, 2]), "infer"
    if entry == "write_report":
        return ("mlp",), dict(hw="t4", out=At("r.html", True)), "infer"
    if entry == "write_trace":
        return (At("t.json", True),), {}, "-"
    if entry == "make_plan":
        return ("mlp", ["t4"], [1, 2], ["fp16"], [1], "throughput"), {}, "-"
    if entry == "make_train_plan":
        return ("resnet50-train", ["dgx-h100"], [64], ["bf16"], [8], [1, 2], "cost"), dict(
            steps=3), "-"
    if entry == "make_serving_plan":
        return ("llama-3.1-8b", ["dgx-h100"], ["vllm"], ["fp16"], [1], [1], [8], 1.0, 32, 8,
                500.0, 50.0, "cost"), dict(requests=50), "-"
    return (("t4",) if entry == "load_profile" else ("workstation",)), {}, "-"


# Knobs by mode, to damage (a few of each kind: int, float, str, bool, a file).
MODE_KNOBS = {
    "infer": ("batch", "precision", "software", "seed", "devices", "tf32", "dataflow",
              "image_size", "usd_per_device_hour", "max_events", "seq_len_dist"),
    "train": ("batch", "steps", "epochs", "prep_workers", "io_threads", "prefetch",
              "bucket_mb", "accumulate", "device_spread", "nodes", "dataset", "storage",
              "gpudirect", "allreduce", "devices", "trainable"),
    "serve": ("rate", "requests", "concurrency", "max_batch", "max_wait_ms", "think_time_ms",
              "seed", "batch"),
    "llm": ("batch", "prompt_tokens", "output_tokens", "tp", "pp", "kv_precision",
            "weight_precision", "model_config"),
    "llm-serve": ("rate", "requests", "batching", "length_dist", "slo_ttft_ms", "slo_tpot_ms",
                  "chunked_prefill", "max_batch", "requests_file", "tp", "concurrency"),
    "federated": ("population", "clients_per_round", "rounds", "local_steps", "network",
                  "uplink_mbps", "downlink_mbps", "rtt_ms", "deadline_s", "client_spread",
                  "server", "update_precision"),
}
# Sweep axes that are no list of plain values.
AXES: tuple[Any, ...] = ([], [[1]], [1, [2]], range(1, 3), range(0), (1, 2), {1, 2},
                         np.arange(1, 3), np.array([[1, 2]]), np.array([]), [1, 1], [2, 1],
                         [1, NAN], [1, None], ["1", 2], [True, 2])
# The entries' own parameters, by position, and what each takes.
PARAMS = {
    "simulate": ("workload", "hw"), "compare": ("workload", "hw"), "sweep": ("workload", "hw"),
    "write_report": ("workload", "hw"), "write_trace": ("path",),
    "make_plan": ("workload", "hardware", "batches", "precisions", "counts", "objective"),
    "make_serving_plan": ("workload", "hardware", "software", "precisions", "tps", "pps",
                          "caps", "rate_per_s", "prompt_tokens", "output_tokens",
                          "slo_ttft_ms", "slo_tpot_ms", "objective"),
    "make_train_plan": ("workload", "systems", "batches", "precisions", "devices", "nodes",
                        "objective"),
    "load_profile": ("name_or_path",), "load_system": ("name_or_path",)}
NUMBER_PARAMS = ("rate_per_s", "prompt_tokens", "output_tokens", "slo_ttft_ms", "slo_tpot_ms",
                 "requests", "p99_ms", "max_usd_per_hour", "max_power_kw", "workers")
EXTRA = {"simulate": {"execute": (True, 1, "yes", None, NAN)},
         "compare": {"all_columns": (1, "no", None), "fallback": (0, "false", None, [])},
         "sweep": {"workers": BAD_NUMBERS, "progress": (1, "yes", []), "fallback": (0, "no"),
                   "resume": BAD_ANY, "scheduler": (1, "x", "tcp://127.0.0.1:1", [])},
         "write_report": {"out": BAD_ANY},
         "make_plan": {"p99_ms": BAD_NUMBERS, "max_usd_per_hour": BAD_NUMBERS,
                       "max_power_kw": BAD_NUMBERS, "knobs": (1, [], "batch", {"nope": 1},
                                                              {"batch": NAN}, {1: 2})},
         "make_serving_plan": {"requests": BAD_NUMBERS, "max_usd_per_hour": BAD_NUMBERS,
                               "knobs": (1, [], {"nope": 1}, {"tp": 0})},
         "make_train_plan": {"epochs": BAD_NUMBERS, "steps": BAD_NUMBERS, "top": BAD_NUMBERS,
                             "limits": (1, {}, "deadline", None),
                             "knobs": (1, [], {"nope": 1}, {"nodes": 2}, {"every_node": 1})}}
MISSPELT = ("batchsize", "Batch", "precison", "prep-workers", "stepss", "rates", "bach", "",
            "x" * 300, "batch\n", "__init__", "self", "knobs", "kwargs", "hardware", "mode ",
            "image-size", "SEQ_LEN", "tp_", "numa", "é")
CONFLICTS: tuple[dict[str, Any], ...] = (
    dict(mode="train", rate=100.0), dict(mode="serve", steps=2), dict(mode="infer", steps=2),
    dict(mode="serve", rate=10.0, concurrency=4), dict(mode="train", steps=2, epochs=1),
    dict(seq_len=64, seq_len_dist="uniform:8:64"), dict(padding="pad"),
    dict(pue=1.2), dict(mode="federated", devices=2), dict(mode="train", execute=True),
    dict(batch=[1, 2]), dict(hw=["t4", "a100"]), dict(mode="bogus"), dict(mode=None),
    dict(tp=1, overlap_tp=True), dict(workers=2, scheduler="tcp://127.0.0.1:1"),
    dict(model_config=At("sc.toml")), dict(mode="serve", requests_file=At("trace.csv")),
    dict(fallback=False, precision="fp16"), dict(precision="fp64"), dict(devices=3, tp=2),
    dict(execute=True, mode="serve"), dict(execute=True, mode="federated"), dict(dataflow=""),
    dict(dataflow="ws"), dict(execute=True, seq_len_dist="uniform:8:16"))
# Good Paths: (entry, args, kwargs) that must answer.
GOOD_PATHS: tuple[tuple[str, tuple[Any, ...], dict[str, Any]], ...] = (
    ("simulate", (At("sc.toml"),), dict(hw="t4", batch=2)),
    ("simulate", ("mlp",), dict(hw=At("dev.toml"))),
    ("simulate", ("mlp",), dict(hw=At("sys.toml"), mode="train", steps=2)),
    ("simulate", ("mlp",), dict(hw="workstation", mode="train", steps=2,
                                dataset=At("ds.toml"), storage=At("st.toml"))),
    ("simulate", ("gpt2",), dict(hw="a100", model_config=At("m.json"), output_tokens=4,
                                 prompt_tokens=16)),
    ("simulate", ("gpt2",), dict(hw="a100", mode="serve", requests_file=At("trace.csv"))),
    ("simulate", ("bert_base",), dict(hw="t4", seq_len_dist=At("lens.txt"))),
    ("compare", ("mlp",), dict(hw=[At("dev.toml"), "a100"])),
    ("compare", (At("sc.toml"),), dict(hw=(At("dev.toml"),))),
    ("sweep", ("mlp",), dict(hw=At("dev.toml"), batch=[1, 2], resume=At("s.sqlite"))),
    ("sweep", ("mlp",), dict(hw=[At("dev.toml"), "t4"], batch=[1, 2])),
    ("write_report", ("mlp",), dict(hw=At("dev.toml"), out=At("r.html"))),
    ("write_trace", (At("t.json"),), {}),
    ("make_plan", ("mlp", [At("dev.toml")], [1, 2], ["fp16"], [1], "throughput"), {}),
    ("make_plan", (At("sc.toml"), ["t4"], [1], ["fp16"], [1], "latency"), {}),
    ("load_profile", (At("dev.toml"),), {}), ("load_system", (At("sys.toml"),), {}))


def api_case(picker: Picker) -> ApiCase:
    """A bad call of an entry (1 in 8: a good call with Paths, which must answer)."""
    files = _files()
    special = {"adir": "dir"}
    if picker.chance(0.125):
        entry, args, kwargs = picker.choice(GOOD_PATHS)
        return ApiCase(entry, args, dict(kwargs), files, special, _runs(entry, args, kwargs),
                       must_answer=True, note="good call with Paths")
    entry = picker.choice(ENTRIES)
    args, kwargs, mode = _base(picker, entry)
    args, notes = list(args), []
    for _ in range(picker.integer(1, 2)):
        roll = picker.integer(0, 9)
        takes_knobs = entry in ("simulate", "compare", "sweep", "write_report")
        if roll < 3 or not (takes_knobs or entry in EXTRA):  # a positional parameter
            if "hw" in kwargs and picker.chance(0.5):
                hw = kwargs["hw"]
                kwargs["hw"] = ([*hw[:1], picker.choice(BAD_ANY)] if isinstance(hw, list)
                                and picker.chance(0.3) else picker.choice(BAD_ANY))
                notes.append("hw damaged")
                continue
            i = picker.integer(0, len(args) - 1)
            param = PARAMS[entry][i]
            pool = BAD_NUMBERS if param in NUMBER_PARAMS else BAD_ANY
            if isinstance(args[i], list) and picker.chance(0.5):
                args[i] = [picker.choice(pool)] if picker.chance(0.7) else []
            else:
                args[i] = picker.choice(pool)
            notes.append(f"{param} damaged")
        elif roll < 5 and entry in EXTRA:  # the entry's own keyword
            name = picker.choice(tuple(EXTRA[entry]))
            kwargs[name] = picker.choice(EXTRA[entry][name])
            notes.append(f"{name} damaged")
        elif not takes_knobs:
            name = picker.choice(tuple(EXTRA[entry]))
            kwargs[name] = picker.choice(BAD_ANY)
            notes.append(f"{name} damaged")
        elif roll < 7:  # a knob of the run's mode, a bad value
            name = picker.choice(MODE_KNOBS.get(mode, MODE_KNOBS["infer"]))
            pool = BAD_ANY if KNOBS.get(name) and KNOBS[name].kind is str else BAD_NUMBERS
            value = picker.choice(pool)
            if entry == "sweep" and picker.chance(0.4):
                value = [value, 1] if picker.chance(0.5) else picker.choice(AXES)
            kwargs[name] = value
            notes.append(f"knob {name} damaged")
        elif roll < 8:  # an unknown or misspelt keyword
            name = picker.choice(MISSPELT)
            if name not in PARAMS[entry]:
                kwargs[name] = picker.choice((1, "x", None, [1, 2]))
                notes.append("unknown keyword")
        else:  # conflicting knobs
            conflict = picker.choice(CONFLICTS)
            kwargs.update({k: v for k, v in conflict.items() if k not in PARAMS[entry]
                           or k == "hw"})
            notes.append("conflict")
    return ApiCase(entry, tuple(args), kwargs, files, special,
                   _runs(entry, tuple(args), kwargs), note="; ".join(notes))


def _runs(entry: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Simulations the call may ask for, so that the hang limit scales with it."""
    if entry == "write_report":
        return 8  # NB: the run and its relief what-ifs, as the CLI's report
    if entry in ("make_plan", "make_serving_plan", "make_train_plan"):
        return 20
    n = 1
    hw = kwargs.get("hw")
    if entry in ("compare", "sweep") and isinstance(hw, list | tuple):
        n *= max(1, len(hw))
    if entry in ("compare", "sweep") and isinstance(hw, str):
        n *= max(1, hw.count(",") + 1)
    if entry == "sweep":
        for v in kwargs.values():
            n *= len(v) if isinstance(v, list) and v else 1
    return n
