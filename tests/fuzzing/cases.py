"""Fuzz cases built from data files: a built-in device profile, system, link, storage medium,
dataset or scenario, copied into the case's folder, damaged, and run through the command line.

A `Case` is plain data (argv with ``{dir}`` for the case's folder, and the files to write
there), so it can be printed as a reproducer and rebuilt from its seed.

    case = make_case(RandomPicker(random.Random(3)))
    case.argv        # ['simulate', 'resnet18', '--hw', '{dir}/dev.toml', '--json']
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files

from .mutate import Picker, damage_text, mutate_doc, scale_numbers
from .toml_text import dumps

MODELS = ("mlp", "lstm", "resnet18", "resnet50", "mobilenet_v2", "gpt2", "bert_base",
          "inception_v1", "unet3d", "vgg16", "llama2_7b", "bert_large", "llama2_70b")
DEVICES = tuple(builtin_files("hw_profiles", "devices/*.toml"))
SYSTEMS = tuple(builtin_files("hw_profiles", "systems/*.toml"))
SCENARIOS = tuple(builtin_files("workloads", "*.toml"))
TRAIN_SCENARIOS = ("resnet50-train", "unet3d-train", "bert-large-train")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
DIR = "{dir}"


@dataclass
class Case:
    """One command line and the files it reads. `damaged` names the files that were mutated
    (an error about them should name one); `special` holds paths made as a directory ("dir")
    or a named pipe ("fifo") instead of a file."""

    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)
    damaged: tuple[str, ...] = ()
    note: str = ""

    @property
    def runs(self) -> int:
        """Simulations the command asks for (compare: one per hardware; sweep: the grid;
        report: the run and its what-ifs), so a time limit per simulation can scale."""
        return simulations(self.argv)

    def args(self, folder: Path | str) -> list[str]:
        """argv with the case's folder filled in."""
        return [a.replace(DIR, str(folder)) for a in self.argv]

    def reproducer(self) -> str:
        """A shell-ish line: the command, then what was done to which file."""
        cmd = "accelsim " + " ".join(_quote(a) for a in self.argv)
        return cmd + (f"   # {self.note}" if self.note else "")


def simulations(argv: list[str]) -> int:
    """How many simulations `argv` asks for, from its comma lists (1 where unsure)."""
    from accelsim.explore.grid import expand_axis

    cmd = argv[0] if argv else ""
    if cmd not in ("compare", "sweep", "report"):
        return 1
    if cmd == "report":
        return 8  # NB: the run and its relief what-ifs (a few steps each)
    runs = 1
    for flag, value in zip(argv, argv[1:], strict=False):
        name = flag.lstrip("-").replace("-", "_")
        if flag == "--set":
            name, _, value = value.partition("=")
        if flag == "--hw" or (cmd == "sweep" and flag.startswith("-") and "," in value):
            try:
                runs *= max(1, len(value.split(",")) if flag == "--hw"
                            else len(expand_axis(name, value)))
            except Exception:  # noqa: BLE001 - a bad list fails before it runs anything
                pass
    return runs


def _quote(arg: str) -> str:
    plain = arg and all(c.isalnum() or c in "-_./{},=:+" for c in arg)
    return arg if plain else repr(arg)


def _read(folder: str, pattern: str, name: str) -> str:
    return builtin_files(folder, pattern)[name].read_text()


def damaged_file(picker: Picker, text: str, refs: dict[str, str] | None = None) -> tuple[bytes,
                                                                                        str]:
    """`text` (TOML) with its references rewritten (`refs`: dotted key -> new value), then
    damaged: numbers scaled (2 in 5: mostly still valid), mutated as a document (7 in 20) or
    damaged as text (1 in 4). Returns (bytes, what was done)."""
    doc = _with_refs(tomllib.loads(text), refs or {})
    roll = picker.integer(0, 19)
    if roll >= 15:
        return damage_text(picker, dumps(doc)), "text damaged"
    done = scale_numbers(picker, doc) if roll < 8 else mutate_doc(picker, doc)
    return dumps(doc).encode(), "; ".join(done)  # written after the mutation


def run_tail(picker: Picker, mode: str) -> list[str]:
    """Flags for a short run in `mode`, with --json (steps and requests kept small)."""
    if mode == "train":
        tail = ["--mode", "train", "--steps", str(picker.integer(1, 6))]
    elif mode == "serve":
        tail = ["--mode", "serve", "--requests", str(picker.integer(1, 300))]
        tail += (["--rate", picker.choice(("1", "100", "5000"))] if picker.chance(0.7)
                 else ["--concurrency", str(picker.integer(1, 64))])
    else:
        tail = []
    if picker.chance(0.5):
        tail += ["--precision", picker.choice(PRECISIONS)]
    if picker.chance(0.3):
        tail += ["--batch", str(picker.choice((1, 2, 8, 64, 256)))]
    return [*tail, "--json"]


def profile_case(picker: Picker) -> Case:
    """A damaged device profile, simulated, compared or reported."""
    name = picker.choice(DEVICES)
    data, note = damaged_file(picker, _read("hw_profiles", "devices/*.toml", name))
    model = picker.choice(MODELS)
    hw = f"{DIR}/dev.toml"
    cmd = picker.choice(("simulate", "simulate", "simulate", "compare", "report"))
    mode = picker.choice(("infer", "infer", "serve", "train"))
    if cmd == "compare":
        argv = ["compare", model, "--hw", f"{picker.choice(DEVICES)},{hw}", *run_tail(picker,
                                                                                   mode)]
    elif cmd == "report":
        argv = ["report", model, "--hw", hw, "--out", f"{DIR}/r.html",
                *run_tail(picker, mode)[:-1]]
    else:
        argv = ["simulate", model, "--hw", hw, *run_tail(picker, mode)]
    return Case("profile", argv, {"dev.toml": data}, damaged=("dev.toml",),
                note=f"hw_profiles/devices/{name}.toml: {note}")


# The parts a system names, and where their files live.
_PARTS = {
    "links.host_to_device": ("links/*.toml", "h2d.toml"),
    "links.device_to_device": ("links/*.toml", "d2d.toml"),
    "links.network": ("links/*.toml", "net.toml"),
    "storage.name": ("storage/*.toml", "storage.toml"),
    "default_dataset": ("datasets/*.toml", "dataset.toml"),
}


def _get(doc: dict[str, Any], dotted: str) -> Any:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def system_case(picker: Picker, target: str | None = None) -> Case:
    """A system whose parts are copied beside it; the system or one part is damaged.
    `target`: "system", "link", "storage", "dataset" or "device" (None: any)."""
    name = picker.choice(SYSTEMS)
    text = _read("hw_profiles", "systems/*.toml", name)
    doc = tomllib.loads(text)
    files: dict[str, bytes] = {}
    refs: dict[str, str] = {}
    for dotted, (pattern, file_name) in _PARTS.items():
        part = _get(doc, dotted)
        if part is not None:
            files[file_name] = builtin_files("hw_profiles", pattern)[part].read_bytes()
            refs[dotted] = file_name
    device = doc["accelerator"]["device"]
    files["dev.toml"] = builtin_files("hw_profiles", "devices/*.toml")[device].read_bytes()
    refs["accelerator.device"] = f"{DIR}/dev.toml"
    target = target or picker.choice(("system", "system", "link", "storage", "dataset",
                                      "device"))
    choices = {"system": ["sys.toml"], "device": ["dev.toml"],
               "link": [f for f in ("h2d.toml", "d2d.toml", "net.toml") if f in files],
               "storage": ["storage.toml"], "dataset": ["dataset.toml"]}[target]
    victim = picker.choice(choices)
    if victim == "sys.toml":
        files["sys.toml"], note = damaged_file(picker, text, refs)
    else:
        files["sys.toml"] = dumps(_with_refs(doc, refs)).encode()
        files[victim], note = damaged_file(picker, files[victim].decode())
    mode = picker.choice(("train", "train", "train", "infer", "serve"))
    workload = picker.choice(TRAIN_SCENARIOS) if mode == "train" and picker.chance(0.6) \
        else picker.choice(MODELS)
    argv = ["simulate", workload, "--hw", f"{DIR}/sys.toml", *run_tail(picker, mode)]
    return Case(target, argv, files, damaged=(victim,),
                note=f"system {name}, {victim} damaged: {note}")


def _with_refs(doc: dict[str, Any], refs: dict[str, str]) -> dict[str, Any]:
    """`doc` with each dotted key of `refs` set to its value (in place)."""
    for dotted, value in refs.items():
        *path, key = dotted.split(".")
        node = doc
        for part in path:
            node = node[part]
        node[key] = value
    return doc


def part_flag_case(picker: Picker) -> Case:
    """A damaged storage medium or dataset given by --storage or --dataset to a training run."""
    kind = picker.choice(("storage", "dataset"))
    pattern = "storage/*.toml" if kind == "storage" else "datasets/*.toml"
    name = picker.choice(tuple(builtin_files("hw_profiles", pattern)))
    data, note = damaged_file(picker, _read("hw_profiles", pattern, name))
    hw = picker.choice(("dgx-a100", "workstation", "dgx-h100", "dgx-1", "tpu-v3-8",
                        "fpga-server", "edge-device"))
    argv = ["simulate", picker.choice(TRAIN_SCENARIOS + MODELS[:4]), "--hw", hw,
            f"--{kind}", f"{DIR}/{kind}.toml", *run_tail(picker, "train")]
    return Case(kind, argv, {f"{kind}.toml": data}, damaged=(f"{kind}.toml",),
                note=f"hw_profiles/{pattern[:-7]}/{name}.toml: {note}")


def scenario_case(picker: Picker) -> Case:
    """A damaged scenario, simulated on a device or system, or described."""
    name = picker.choice(SCENARIOS)
    data, note = damaged_file(picker, _read("workloads", "*.toml", name))
    sc = f"{DIR}/sc.toml"
    roll = picker.integer(0, 9)
    if roll < 2:
        argv = ["describe", sc, "--json"]
    elif roll < 6:
        argv = ["simulate", sc, "--hw", picker.choice(DEVICES), "--json"]
    else:
        mode = picker.choice(("train", "serve", "infer"))
        argv = ["simulate", sc, "--hw", picker.choice(SYSTEMS), *run_tail(picker, mode)]
    return Case("scenario", argv, {"sc.toml": data}, damaged=("sc.toml",),
                note=f"workloads/{name}.toml: {note}")


FILE_CASES: dict[str, Callable[[Picker], Case]] = {
    "profile": profile_case,
    "system": system_case,
    "link": lambda p: system_case(p, "link"),
    "part": part_flag_case,
    "scenario": scenario_case,
}
