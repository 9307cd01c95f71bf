"""DLIO's `summary.json` for a simulated run of a DLIO workload configuration: the keys DLIO's
StatsCounter writes (dlio_benchmark/utils/statscounter.py), filled from the emulation.

    summary = dlio_summary(cfg, record, system)      # cfg: profiles.dlio.load_dlio(...)

DLIO's units: AU in percent, throughput in samples/s summed over the accelerators,
`train_io_mean_MB_per_second` = samples/s x record_length / 2^20 (MiB/s, DLIO's own rule and
name), host memory and data size in GiB. DLIO lists one value per epoch; a simulation
measures one steady window, so each list holds one value and every stdev is 0. Wall-clock
keys (start, end, hostname, cpuinfo) are left out: nothing ran.
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
MIB = 2**20


def dlio_summary(cfg: Any, record: dict[str, Any], system: Any) -> dict[str, Any]:
    """summary.json's keys for `record` (`mlperf_storage.emulate`) of `cfg` (a
    `profiles.dlio.DlioConfig`, a floor above: not imported) on `system`."""
    au_pct = 100.0 * record["accelerator_utilization"]
    tput = record["samples_per_s"]
    data_gib = cfg.dataset.sample_count * cfg.record_length_bytes / GIB
    memory_gib = system.host.dram_bytes / GIB
    return {
        "num_accelerators": record["devices"],
        "num_hosts": 1,
        "metric": {
            "train_au_percentage": [au_pct],
            "train_au_mean_percentage": au_pct,
            "train_au_meet_expectation": ("success" if au_pct >= cfg.emulation.au_target * 100
                                          else "fail"),
            "train_au_stdev_percentage": 0.0,
            "train_throughput_samples_per_second": [tput],
            "train_throughput_mean_samples_per_second": tput,
            "train_throughput_stdev_samples_per_second": 0.0,
            "train_io_mean_MB_per_second": tput * cfg.record_length_bytes / MIB,
            "train_io_stdev_MB_per_second": 0.0,
        },
        "num_files_train": cfg.dataset.file_count,
        "num_files_eval": cfg.num_files_eval,
        "num_samples_per_file": cfg.dataset.samples_per_file,
        "host_cpu_count": [system.host.cores],
        "host_memory_GB": [memory_gib],
        "data_size_per_host_GB": data_gib,
        # DLIO's rule: 1 where the host's memory could hold the whole dataset
        "potential_caching": [0 if memory_gib <= data_gib else 1],
        "epochs": 1,
        "simulated_by": (f"accelsim: {cfg.path.name} on {system.name}, "
                         "one steady window (not a measurement)"),
    }
