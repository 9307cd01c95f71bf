"""Fuzz cases built from argument lists: every command with valid, extreme and conflicting
flags, and bad paths where the command line takes a file.

    case = cli_case(RandomPicker(random.Random(5)))
    case.argv    # ['sweep', 'mlp', '--hw', 'a100,t4', '--batch', '1,2,...,64', '--json', '-q']
"""

from __future__ import annotations

from accelsim.datafiles import builtin_files
from accelsim.sim.knobs import KNOBS

from .cases import DEVICES, DIR, MODELS, SCENARIOS, SYSTEMS, Case, run_tail
from .mutate import Picker

INT_VALUES = ("1", "2", "3", "4", "8", "16", "64", "0", "-1", "65536", "1048576", "1048577",
              "99999999999999999999", "1e3", "1.5", "nan", "inf", "x", "", " 7 ", "1e400", "-0",
              "+3", "1_000", "9223372036854775808")
FLOAT_VALUES = ("100", "0.5", "1e-6", "1e9", "1e10", "0", "-5", "nan", "inf", "-inf", "5e-324",
                "1e308", "x", "1e-7", "2.5", "1e-300", "")
SMALL_VALID = {
    "steps": ("1", "2", "5", "20"), "epochs": ("1",), "requests": ("1", "10", "200", "1000"),
    "rate": ("1", "100", "5000", "1e6"), "concurrency": ("1", "4", "64"),
    "max_batch": ("1", "8", "32"), "max_wait_ms": ("0", "1", "5"), "think_time_ms": ("0", "3"),
    "max_events": ("100", "10000", "5000000"), "seed": ("0", "1", "12345"),
    "devices": ("1", "2", "8"), "batch": ("1", "2", "16", "128"),
    "io_threads": ("1", "4", "16"), "prep_workers": ("1", "4", "16"),
    "prefetch": ("0", "1", "4"), "storage_count": ("1", "2", "8"),
}
CHOICES = {
    "mode": ("infer", "train", "serve", "INFER", "x", ""),
    "precision": ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "FP16", "fp8_e4m3",
                  "fp8_e5m2", "int4", ""),
    "software": ("eager", "compiled", "jit"), "dataflow": ("ws", "os", "is", "xs"),
    "allreduce": ("ring", "tree", "mesh"), "optimizer": ("sgd", "momentum", "adam", "lamb"),
    "dataset": ("imagenet-raw", "imagenet-records", "synthetic-small", "synthetic-large",
                "mlperf-unet3d", "nope", f"{DIR}/nope.toml", f"{DIR}/adir.toml"),
    "storage": ("nvme-gen4", "nvme-gen5", "hdd", "nas-nfs", "object-store", "emmc",
                "sata-ssd", "tape", f"{DIR}"),
}
BOOL_FLAGS = {"gpudirect": ("--gpudirect", "--no-gpudirect"), "pinned_memory": ("--pinned",
              "--pageable"), "overlap_allreduce": ("--overlap", "--no-overlap")}
ELLIPSES = ("1,2,...,64", "1,2,4,...,1024", "8,16,...,4", "1,...,5", "0,0,...,5", "1,-1,...,5",
            "1000000000,1000000001,1000000003,...,2000000000", "1,3,9,...,100000",
            "0.5,1,...,3", "nan,1,...,2", "1,2,3,...,1e400", "2,4,...,2")
SETS = ("prep_workers=2,4", "batch=1,2", "x=1", "=", "batch", "image_size=32,64", "seq_len=0",
        "mode=train", "layers=10000,10001", "layers=1000000", "hidden=1048576,1", "classes=0",
        "volume_size=1048576", "vocab_size=1,1048576", "in_channels=4096")
BAD_PATHS = (f"{DIR}/nope.toml", f"{DIR}/adir.toml", f"{DIR}/fifo.toml", f"{DIR}/" + "a" * 300
             + ".toml", f"{DIR}/nofolder/x.toml", "", "-", "/", f"{DIR}/bin.toml",
             f"{DIR}/empty.toml", f"{DIR}/" + "d/" * 40 + "x.toml", f"{DIR}/new\nline.toml")
OUT_PATHS = (f"{DIR}/out", f"{DIR}/adir.toml", f"{DIR}/nofolder/out", f"{DIR}/fifo.toml", "",
             f"{DIR}/" + "o" * 300)


def _value(picker: Picker, name: str, valid: bool) -> str:
    if name in CHOICES:
        return picker.choice(CHOICES[name][:3] if valid else CHOICES[name])
    if valid and name in SMALL_VALID:
        return picker.choice(SMALL_VALID[name])
    if name in ("image_size", "seq_len"):
        return picker.choice(("32", "64", "224", "512") if valid else INT_VALUES)
    return picker.choice(FLOAT_VALUES if KNOBS[name].kind is float else INT_VALUES)


def knob_flags(picker: Picker, mode: str, many: int, lists: bool = False) -> list[str]:
    """Up to `many` knob flags: mostly knobs of `mode` with small valid values, sometimes any
    knob with an extreme value. `lists`: values may be comma lists and elided runs."""
    names = [k.name for k in KNOBS.values() if k.name not in ("mode",)] + ["image_size",
                                                                          "seq_len"]
    out: list[str] = []
    used: set[str] = set()
    for _ in range(picker.integer(0, many)):
        valid = picker.chance(0.6)
        pool = [n for n in names if n in ("image_size", "seq_len") or mode in KNOBS[n].modes]
        name = picker.choice(pool if valid else names)
        if name in used:
            continue
        used.add(name)
        if name in BOOL_FLAGS:
            if lists:
                out += [f"--{name.replace('_', '-')}", picker.choice(("true", "false", "yes",
                                                                       "maybe", "1,0"))]
            else:
                out.append(picker.choice(BOOL_FLAGS[name]))
            continue
        value = _value(picker, name, valid)
        if lists and picker.chance(0.4):
            value = (picker.choice(ELLIPSES) if KNOBS.get(name, KNOBS["batch"]).kind in (int,
                     float) and picker.chance(0.4)
                     else ",".join(_value(picker, name, valid) for _ in range(
                         picker.integer(1, 3))))
        out += [f"--{name.replace('_', '-')}", value]
    return out


def _describe_flags(picker: Picker) -> list[str]:
    out: list[str] = []
    for name in ("batch", "precision", "seq_len", "image_size"):
        if picker.chance(0.3):
            out += [f"--{name.replace('_', '-')}", _value(picker, name, picker.chance(0.6))]
    return out


def _workload(picker: Picker) -> str:
    roll = picker.integer(0, 19)
    if roll < 12:
        return picker.choice(MODELS)
    if roll < 18:
        return picker.choice(SCENARIOS)
    return picker.choice(("", "x", "resnet50.toml", f"{DIR}/adir.toml", f"{DIR}/fifo.toml",
                          f"{DIR}/bin.toml", "-", "mlp ", "RESNET50"))


def _hw(picker: Picker, several: bool = False) -> str:
    pool = DEVICES + SYSTEMS
    if picker.chance(0.1):
        return picker.choice(("", ",", "a100,,t4", "x", "a100,a100", f"{DIR}/adir.toml",
                              f"{DIR}/fifo.toml", f"{DIR}/bin.toml", "A100", "a100 "))
    if several:
        return ",".join(picker.choice(pool) for _ in range(picker.integer(1, 4)))
    return picker.choice(pool)


def _mode_flags(picker: Picker) -> tuple[str, list[str]]:
    mode = picker.choice(("infer", "infer", "train", "serve"))
    flags = [] if mode == "infer" and picker.chance(0.5) else ["--mode", mode]
    if mode == "serve" and picker.chance(0.8):
        flags += picker.choice((["--rate", picker.choice(("10", "1000"))],
                                ["--concurrency", picker.choice(("1", "16"))]))
    if mode == "train" and picker.chance(0.8):
        flags += ["--steps", picker.choice(("1", "3", "10"))]
    if mode == "serve" and picker.chance(0.7):
        flags += ["--requests", picker.choice(("10", "100"))]
    return mode, flags


def cli_case(picker: Picker) -> Case:
    """One command with random flags (and the odd bad path or output file)."""
    cmd = picker.choice(("simulate",) * 9 + ("compare",) * 3 + ("sweep",) * 3
                        + ("describe",) * 3 + ("report", "list"))
    workload = _workload(picker)
    mode, mode_flags = _mode_flags(picker)
    if cmd == "list":
        argv = ["list", *(["--json"] if picker.chance(0.8) else [])]
    elif cmd == "describe":
        argv = ["describe", workload, *_describe_flags(picker)]
        argv += (["--execute"] if picker.chance(0.3) else []) + ["--json"]
    elif cmd == "sweep":
        argv = ["sweep", workload, "--hw", _hw(picker, True), *mode_flags,
                *knob_flags(picker, mode, 3, lists=True), "--json", "-q"]
        if picker.chance(0.15):
            argv += ["--set", picker.choice(SETS)]
    else:
        argv = [cmd, workload, "--hw", _hw(picker, cmd == "compare"), *mode_flags,
                *knob_flags(picker, mode, 4)]
        if cmd == "report":
            argv += ["--out", f"{DIR}/r.html"]
        else:
            argv.append("--json")
    outputs = {"simulate": ("--trace",), "compare": ("--csv", "--plot", "--roofline"),
               "sweep": ("--csv", "--resume", "--plot"), "report": ("--out",)}.get(cmd, ())
    if outputs and picker.chance(0.15):
        argv += [picker.choice(outputs), picker.choice(OUT_PATHS) + picker.choice(
            (".json", ".png", ".csv", ".html", ".sqlite", ".xyz", ""))]
    if picker.chance(0.1) and cmd not in ("list",):
        argv[1] = picker.choice(BAD_PATHS)  # the workload is a bad path
    return Case("cli", argv, _BAD_FILES, special=_SPECIAL, note="argument list")


# Files every argument-list case may point at, and paths made as folders or pipes.
_BAD_FILES = {"bin.toml": b"\x00\xff\xfe" * 10, "empty.toml": b""}
_SPECIAL = {"adir.toml": "dir", "fifo.toml": "fifo"}


def path_case(picker: Picker) -> Case:
    """A bad path where a file is read (workload, --hw, --dataset, --storage) or written."""
    where = picker.choice(("workload", "hw", "dataset", "storage"))
    bad = picker.choice(BAD_PATHS)
    wrong_kind = {"workload": f"{DIR}/dev.toml", "hw": f"{DIR}/sc.toml"}
    if picker.chance(0.2) and where in wrong_kind:
        bad = wrong_kind[where]
    workload = bad if where == "workload" else picker.choice(("resnet50-train", "mlp"))
    hw = bad if where == "hw" else picker.choice(("dgx-a100", "a100"))
    argv = ["simulate", workload, "--hw", hw]
    if where in ("dataset", "storage"):
        argv += [f"--{where}", bad, *run_tail(picker, "train")]
    else:
        argv += run_tail(picker, picker.choice(("infer", "train")))
    files = {**_BAD_FILES, "dev.toml": _builtin("hw_profiles", "devices/*.toml", "t4"),
             "sc.toml": _builtin("workloads", "*.toml", "resnet50-infer")}
    return Case("path", argv, files, special=_SPECIAL, note=f"bad path for {where}")


def _builtin(folder: str, pattern: str, name: str) -> bytes:
    return builtin_files(folder, pattern)[name].read_bytes()
