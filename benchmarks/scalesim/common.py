"""What the SCALE-Sim parity harness's accelsim-side modules share: paths (topologies, caches,
the report), the configurations compared (networks, arrays, SRAMs, dataflows), the command that
starts a SCALE-Sim process on jobs, SCALE-Sim's cached whole-network results, accelsim's run of
a SCALE-Sim topology on a SCALE-Sim .cfg, and Markdown helpers. See parity.py.
"""

from __future__ import annotations

import io
import math
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from accelsim.devices.systolic.scalesim.config import cfg_text
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
TOPOLOGIES = BENCHMARKS / "scalesim_topologies"
CACHE = BENCHMARKS / "results" / "scalesim_cache"
LAYER_CACHE = CACHE / "layers"
WALL = CACHE / "wall_s.csv"
RESULTS = BENCHMARKS / "results" / "scalesim_parity.md"
ENTRY = HERE / "run.py"  # `run.py jobs`: SCALE-Sim on JSON jobs, in SCALE-Sim's own Python
NETS = {"resnet50": False, "bert_base": True}  # name -> GEMM form
SRAM_KB = {32: (64, 64, 64), 128: (1024, 1024, 512), 256: (6144, 6144, 2048)}
DATAFLOWS = ("ws", "os", "is")
WORDS_PER_CYCLE = 10
NET_TARGET, LAYER_TARGET = 0.10, 0.15
PER_LAYER_SIZES = (32,)  # arrays where SCALE-Sim is run one layer at a time
CONV_HEADER = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
               "Num Filter, Strides,")


def scalesim_python() -> str:
    """The Python with SCALE-Sim v3: $SCALESIM_PYTHON, else /tmp/ssenv/bin/python."""
    return os.environ.get("SCALESIM_PYTHON", "/tmp/ssenv/bin/python")


def scalesim_command(python: str, nice: int) -> list[str]:
    """The command line of one niced SCALE-Sim process reading jobs (JSON) on stdin."""
    return ["nice", "-n", str(nice), python, str(ENTRY), "jobs"]


def key(net: str, size: int, flow: str) -> str:
    return f"{net}_{size}_{flow}"


def cfg_for(size: int, flow: str) -> str:
    return cfg_text(size, size, *SRAM_KB[size], WORDS_PER_CYCLE, flow, run_name=f"a{size}")


def whole_network_job(net: str, size: int, flow: str, **extra: object) -> dict:
    """The SCALE-Sim job of network `net` on the `size` x `size` array in `flow`."""
    return {"cfg": cfg_for(size, flow), "topology": (TOPOLOGIES / f"{net}.csv").read_text(),
            "gemm": NETS[net], **extra}


def report_frame(text: str) -> pd.DataFrame:
    """A SCALE-Sim report's CSV text as a table (without the empty column of its trailing
    commas)."""
    frame = pd.read_csv(io.StringIO(text), skipinitialspace=True)
    return frame.loc[:, ~frame.columns.str.startswith("Unnamed")]


def cached(net: str, size: int, flow: str) -> pd.DataFrame | None:
    path = CACHE / f"{key(net, size, flow)}.csv"
    if not path.exists():
        return None
    return report_frame(path.read_text())


def wall_times() -> dict[str, float]:
    if not WALL.exists():
        return {}
    return {row.key: float(row.wall_s) for row in pd.read_csv(WALL).itertuples()}


def accelsim_layers(net: str, size: int, flow: str) -> list[dict]:
    """`accelsim simulate <net>.csv --hw <array>.cfg` per-layer records (wall s in each)."""
    with tempfile.TemporaryDirectory() as folder:
        cfg = Path(folder) / f"a{size}_{flow}.cfg"
        cfg.write_text(cfg_for(size, flow))
        start = time.perf_counter()
        record = run_simulation(make_config(str(TOPOLOGIES / f"{net}.csv"), str(cfg),
                                            precision="int8")).record
        wall_s = time.perf_counter() - start
    return [la | {"wall_s": wall_s} for la in record["layers"]]


def accelsim_cycles(net: str, size: int, flow: str) -> tuple[list[float], list[str], float]:
    """Per-layer total cycles and names from `accelsim simulate`, and its wall time."""
    records = accelsim_layers(net, size, flow)
    return ([la["cycles"] for la in records], [la["name"] for la in records],
            records[0]["wall_s"])


def na(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def markdown(frame: pd.DataFrame) -> str:
    """A GitHub table (no tabulate dependency)."""
    cells = [list(map(str, frame.columns))] + [list(map(str, r)) for r in frame.to_numpy()]
    rows = ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join([rows[0], "| " + " | ".join("---" for _ in frame.columns) + " |", *rows[1:]])
