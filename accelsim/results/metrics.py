"""Training metrics as pure functions of the records DataFrame (`accelsim.results.records`).

    run_s = run_time_s(df)
    util = utilization(df, {"pcie": "host_to_device", "nvswitch": "device_to_device"},
                       {"host_cpu": 120, "host_to_device": 8, "accelerators": 8}, run_s)
    stalls(df, devices=8, run_time_s=run_s)                 # accelerator time lost, by cause
    accelerator_utilization(df)                             # MLPerf Storage AU
    energy_breakdown_j(df, ["pcie", "nvswitch", "network"], static_w=50.0, run_time_s=run_s,
                       devices=8)
    bottleneck(df, run_s, devices=8, utilization=util)      # ("io", "request latency ...")

Two figures, labelled apart: `utilization` is the busy share of the whole run of each role
in `ROLES`, every role present (0 when idle; "accelerators" is the mean over accelerators,
first step included, decoding on their SMs counted busy); `accelerator_utilization` is MLPerf
Storage's AU (below), which counts compute only.

Accelerator utilisation, as MLPerf Storage defines it [MLPERF_STORAGE]: the time the
accelerators spend computing over the time the benchmark runs; a submission is valid when it
stays at or above 90 % (ResNet-50 and 3D U-Net; 70 % for CosmoFlow). The first step (the
pipeline filling) is excluded here, as the brief of this model asks.

[MLPERF_STORAGE] MLPerf Storage benchmark rules, https://github.com/mlcommons/storage
  (Rules.md, "accelerator utilization"); thresholds as `metric.au` of the dlio-benchmark 2.0.0
  workload configs (hw_profiles/emulation/) and the MLPerf Storage v1.0 rows' notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from accelsim.results.records import RESIDENCE_KINDS, STALL_KINDS

AU_TARGET = 0.90  # [MLPERF_STORAGE] ResNet-50 / 3D U-Net acceptance threshold
STALL_NAMES = {"stall_fetch": "fetch", "stall_prep": "prep", "stall_transfer": "transfer",
               "stall_sync": "slowest_device", "stall_comm": "communication"}
STAGE_OF_RESIDENCE = {"batch_read": "io", "batch_prep": "prepare",
                      "batch_transfer": "transfer"}
# NB: a stage limits the run when it costs the accelerators more than this share of the run
# (steps after the first); below it, stalls are start-up jitter and compute is the limit.
BOTTLENECK_STALL_SHARE = 0.01
SATURATED = 0.9  # a resource busy this share of the run is taken as the limit
# The roles of `utilization`, the same in every run whatever the system calls its links.
ROLES = ("accelerators", "host_cpu", "host_to_device", "device_to_device", "storage",
         "network", "page_cache", "jpeg_decoder")


def for_metrics(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its text columns categorised: the many selections and group sums of a run's
    figures then compare small integer codes, not every row's string (the same figures)."""
    return df.astype({c: "category" for c in ("resource", "kind", "detail") if c in df})


def run_time_s(df: pd.DataFrame) -> float:
    """From time 0 to the last record's end."""
    return float(df["end_s"].max()) if len(df) else 0.0


def _is_accel(resource: pd.Series) -> pd.Series:
    # the few distinct names tested once each, not every row's
    return resource.isin([r for r in resource.unique() if str(r).startswith("accel")])


def busy_s(df: pd.DataFrame) -> pd.Series:
    """Busy seconds per resource (stall and residence records are waits, not work)."""
    work = df[~df["kind"].isin(STALL_KINDS + RESIDENCE_KINDS)]
    return work.groupby("resource", observed=True)["duration_s"].sum()


def utilization(df: pd.DataFrame, roles: Mapping[str, str], capacities: Mapping[str, int],
                run_time_s: float) -> dict[str, float]:
    """Busy share of the run of every role in `ROLES` (0 when idle). `roles` maps a record's
    resource to its role (accelerators by their "accel" prefix, unmapped resources by their
    own name); a role of `capacity` units (cores, links, accelerators) counts capacity x run
    time as fully busy."""
    out = dict.fromkeys(ROLES, 0.0)
    if run_time_s <= 0:
        return out
    for res, secs in busy_s(df).items():
        name = str(res)
        if name == "dram":
            continue  # NB: DRAM traffic records carry bytes and energy, not busy time.
        role = "accelerators" if name.startswith("accel") else roles.get(name, name)
        if role in out:
            out[role] += float(secs) / (capacities.get(role, 1) * run_time_s)
    return out


def stalls(df: pd.DataFrame, devices: int, run_time_s: float) -> dict[str, dict[str, float]]:
    """Accelerator time lost to each cause: seconds summed over accelerators, and as a
    fraction of all accelerators' run time."""
    by_kind = df[df["kind"].isin(STALL_KINDS)].groupby("kind", observed=True)["duration_s"].sum()
    total = devices * run_time_s
    return {name: {"time_s": float(by_kind.get(kind, 0.0)),
                   "fraction": float(by_kind.get(kind, 0.0)) / total if total > 0 else 0.0}
            for kind, name in STALL_NAMES.items()}


def accelerator_utilization(df: pd.DataFrame, skip_steps: int = 1) -> float:
    """MLPerf Storage AU, averaged over accelerators: compute time of the steps after the
    first `skip_steps` over the time from the end of those to the end of the last step (all
    steps if no later one)."""
    comp = df[(df["kind"] == "compute") & _is_accel(df["resource"])]
    if comp.empty:
        return 0.0
    values = []
    for _, dev in comp.groupby("device"):
        last_skipped = dev["step"].min() + skip_steps - 1
        first = dev[dev["step"] <= last_skipped]
        rest = dev[dev["step"] > last_skipped]
        if rest.empty:
            span = dev["end_s"].max()
            values.append(dev["duration_s"].sum() / span if span > 0 else 1.0)
            continue
        span = rest["end_s"].max() - first["end_s"].max()
        values.append(rest["duration_s"].sum() / span if span > 0 else 1.0)
    return float(sum(values) / len(values))


def compute_s_per_device(df: pd.DataFrame) -> pd.Series:
    """Compute seconds of each accelerator, indexed by device."""
    comp = df[(df["kind"] == "compute") & _is_accel(df["resource"])]
    return comp.groupby("device")["duration_s"].sum()


def energy_breakdown_j(df: pd.DataFrame, link_resources: Iterable[str], static_w: float,
                       run_time_s: float, devices: int,
                       parts: Mapping[str, float | None] | None = None
                       ) -> dict[str, float | None]:
    """Energy by part: accelerators (the device model's step energy), host CPU, DRAM, links,
    static (each accelerator's static power while not computing), then `parts` (storage,
    NICs, switches, device decode: `accelsim.sim.part_energy`; None = unknown). `total` sums
    the known parts."""
    by_res = df[df["kind"] != "decode"].groupby("resource", observed=True)["energy_j"].sum()
    links = set(link_resources)
    acc = float(by_res[[r for r in by_res.index if str(r).startswith("accel")]].sum())
    idle_s = devices * run_time_s - float(compute_s_per_device(df).sum())
    out: dict[str, float | None] = {
        "accelerators": acc,
        "host_cpu": float(by_res.get("host_cpu", 0.0)),
        "dram": float(by_res.get("dram", 0.0)),
        "links": float(by_res[[r for r in by_res.index if r in links]].sum()),
        "static": static_w * max(idle_s, 0.0),
        **(parts or {}),
    }
    out["total"] = sum(v for v in out.values() if v is not None)
    return out


def bottleneck(df: pd.DataFrame, run_time_s: float, devices: int,
               utilization: Mapping[str, float]) -> tuple[str, str]:
    """(stage, why), judged on the steps after the first (the pipeline filling):

    - "compute" when no stall costs the accelerators more than `BOTTLENECK_STALL_SHARE`;
    - "communication" when all-reduce waits cost more than waits for input;
    - else the loader stage ("io", "prepare", "transfer") where batches spent the longest
      waiting for and in service: a queue builds in front of the slowest stage, and the
      stages around it run idle, while the accelerator's own waits are split along the
      pipeline (`stalls`) and so name the last stage as often as the slow one.

    `utilization` is keyed by role (`ROLES`)."""
    later = df[df["step"] > df["step"].min()] if (df["step"] >= 0).any() else df
    lost = later[later["kind"].isin(STALL_KINDS)].groupby("kind", observed=True)["duration_s"].sum()
    total = devices * run_time_s
    # Waiting for the slowest device is its compute setting the pace, not a stage's stall.
    sync = float(lost.pop("stall_sync")) if "stall_sync" in lost else 0.0
    if lost.empty or total <= 0 or lost.sum() / total < BOTTLENECK_STALL_SHARE:
        slowest = (f"; the others wait {sync / total:.0%} of their time for the slowest "
                   "device" if total > 0 and sync / total >= 0.005 else "")
        on_sms = later[(later["kind"] == "decode") & _is_accel(later["resource"])]
        share_sms = float(on_sms["duration_s"].sum()) / total if total > 0 else 0.0
        if share_sms >= BOTTLENECK_STALL_SHARE:
            return "compute", (f"the accelerators are busy nearly all of the run, "
                               f"{share_sms:.0%} of it decoding input on their SMs{slowest}")
        return "compute", f"the accelerators compute for nearly all of the run{slowest}"
    comm = float(lost.get("stall_comm", 0.0))
    share = f"{lost.sum() / total:.0%} of accelerator time lost to stalls"
    if comm >= lost.sum() - comm:
        return "communication", f"the gradient all-reduce is not hidden behind backward ({share})"
    resid = later[later["kind"].isin(RESIDENCE_KINDS)].groupby(
        "kind", observed=True)["duration_s"].sum()
    stage = STAGE_OF_RESIDENCE[str(resid.idxmax())] if not resid.empty else "io"

    def util(role: str) -> float:
        return utilization.get(role, 0.0)

    if stage == "io":
        if util("network") >= SATURATED:
            why = "the network to the storage is saturated"
        elif util("storage") >= SATURATED:
            why = "storage bandwidth or IOPS is saturated"
        else:
            why = "request latency: too few parallel reads (io_threads) for the file sizes"
    elif stage == "prepare" and (later["kind"] == "decode").any():
        why = "decoding on the accelerators (SMs or hardware JPEG decoder)"
    elif stage == "prepare":
        why = ("host CPU cores are saturated" if util("host_cpu") >= SATURATED
               else "too few prep workers")
    else:
        why = "the host-to-device link"
    return stage, f"{why} ({share})"
