"""Data side of the storage-to-accelerator pipeline: links, storage media, datasets, systems.

Tiers: every built-in loads; closed forms; the file-size sampler; figures cross-checked
against shared/reference/hardware_specs.csv read independently here; bad files rejected
with an error naming file, field and value.
"""

from __future__ import annotations

import csv
import json
import math
import pickle
import re
import statistics
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError, UnknownNameError
from accelsim.interconnect.links import transfer_time_s
from accelsim.profiles.datasets import available_datasets, load_dataset
from accelsim.profiles.links import available_links, load_link
from accelsim.profiles.storage import available_storage, load_storage
from accelsim.profiles.systems import available_systems, load_system
from accelsim.sim.readplan import read_time_s, sample_file_sizes_bytes
from tests.helpers.paths import REFERENCE

LOADERS = {"links": load_link, "storage": load_storage, "datasets": load_dataset,
           "systems": load_system}
AVAILABLE = {"links": available_links, "storage": available_storage,
             "datasets": available_datasets, "systems": available_systems}


# ---------------------------------------------------------------- every built-in loads

@pytest.mark.parametrize("folder", sorted(LOADERS))
def test_every_builtin_loads_frozen_and_picklable(folder: str) -> None:
    names = AVAILABLE[folder]()
    assert names, folder
    for name in names:
        obj = LOADERS[folder](name)
        assert obj.name == name
        assert pickle.loads(pickle.dumps(obj)) == obj
        hash(obj)
        with pytest.raises(AttributeError):
            obj.name = "x"  # type: ignore[misc]


def test_brief_names_exist() -> None:
    assert {"pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "nvlink2", "nvlink3", "nvlink4",
            "nvswitch-gen2", "nvswitch-gen3", "ethernet-25g", "ethernet-100g",
            "infiniband-hdr-200g", "infiniband-ndr-400g"} <= set(available_links())
    assert {"nvme-gen4", "nvme-gen5", "sata-ssd", "hdd", "nas-nfs", "object-store",
            "emmc"} <= set(available_storage())
    assert {"imagenet-raw", "imagenet-records", "mlperf-unet3d", "mlperf-resnet50",
            "mlperf-cosmoflow", "synthetic-small", "synthetic-large"} <= set(available_datasets())
    assert {"dgx-a100", "dgx-h100", "dgx-1", "workstation", "tpu-v3-8", "fpga-server",
            "edge-device"} <= set(available_systems())


def test_systems_compose_the_named_parts() -> None:
    a100 = load_system("dgx-a100")
    assert (a100.device, a100.device_count, a100.nic_count) == ("a100", 8, 8)
    assert a100.host_to_device.name == "pcie-gen4-x16"
    assert a100.device_to_device is not None and a100.device_to_device.name == "nvswitch-gen2"
    assert a100.gpudirect_storage and a100.gpudirect_rdma
    assert a100.storage_read_bandwidth_bytes_per_s == 8 * 7000e6
    assert a100.host.page_cache_bandwidth_bytes_per_s == a100.host.dram_bandwidth_bytes_per_s
    edge = load_system("edge-device")
    assert edge.host.cpu_inline is not None and edge.host.cpu_inline.clock_hz == 1.5e9
    assert edge.network is None and edge.network_bandwidth_bytes_per_s == 0.0
    assert edge.storage.name == "emmc"
    assert load_system("tpu-v3-8").storage.over_network


def test_unknown_name_lists_choices() -> None:
    with pytest.raises(UnknownNameError, match="pcie-gen4-x16"):
        load_link("pcie-gen9")
    for loader in (load_storage, load_dataset, load_system):
        with pytest.raises(UnknownNameError):
            loader("no-such-thing")


# ---------------------------------------------------------------- closed forms

def test_transfer_time_closed_form() -> None:
    link = load_link("pcie-gen4-x16")
    assert link.bandwidth_bytes_per_s == 31.5e9 and link.latency_s == 1e-6
    assert transfer_time_s(0, link) == link.latency_s
    assert transfer_time_s(1e9, link) == pytest.approx(1e-6 + 1e9 / 31.5e9, rel=1e-12)
    achieved = transfer_time_s(1e9, link, achieved=True)
    assert achieved == pytest.approx(1e-6 + 1e9 / (31.5e9 * 0.90), rel=1e-12)
    t1, t2 = transfer_time_s(1e6, link), transfer_time_s(2e6, link)
    assert t2 - t1 == pytest.approx(1e6 / 31.5e9)
    with pytest.raises(ValueError):
        transfer_time_s(-1, link)


def test_read_time_closed_form() -> None:
    nvme = load_storage("nvme-gen4")
    assert read_time_s(7e6, nvme) == pytest.approx(30e-6 + 1e-3)
    assert read_time_s(7e6, nvme, gds=True) == pytest.approx(20e-6 + 1e-3)
    assert load_storage("object-store").read_bandwidth_bytes_per_s == math.inf


# ---------------------------------------------------------------- file-size sampler

@pytest.mark.parametrize("name", available_datasets())
def test_sampler_mean_matches_published_mean(name: str) -> None:
    ds = load_dataset(name)
    sizes = sample_file_sizes_bytes(ds, 100_000, np.random.default_rng(1234))
    assert sizes.dtype == np.int64 and sizes.shape == (100_000,) and sizes.min() >= 1
    assert sizes.mean() == pytest.approx(ds.file_size_mean_bytes, rel=0.02)
    if ds.file_size_stdev_bytes > 0:
        assert sizes.std() == pytest.approx(ds.file_size_stdev_bytes, rel=0.1)


def test_sampler_is_deterministic_for_a_seed() -> None:
    ds = load_dataset("imagenet-raw")
    a = sample_file_sizes_bytes(ds, 1000, 7)
    b = sample_file_sizes_bytes(ds, 1000, np.random.default_rng(7))
    c = sample_file_sizes_bytes(ds, 1000, 8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert sample_file_sizes_bytes(ds, 0, 0).shape == (0,)


# ---------------------------------------------------------------- reference cross-checks

def _reference_rows() -> list[dict[str, str]]:
    path = REFERENCE / "hardware_specs.csv"
    if not path.exists():
        pytest.skip(f"reference not found at {path}")
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def ref() -> dict[tuple[str, str], float]:
    """(name, field) -> value of the first numeric row."""
    out: dict[tuple[str, str], float] = {}
    for row in _reference_rows():
        try:
            out.setdefault((row["name"], row["field"]), float(row["value"]))
        except ValueError:
            pass
    return out


def test_links_match_reference(ref: dict[tuple[str, str], float]) -> None:
    for gen in (3, 4, 5):
        link = load_link(f"pcie-gen{gen}-x16")
        assert link.bandwidth_bytes_per_s == pytest.approx(
            ref[(f"PCIe Gen{gen} x16", "bandwidth_per_direction")] * 1e9)
    for gen, row in ((2, "NVLink 2.0 (V100)"), (3, "NVLink 3.0 (A100)"),
                     (4, "NVLink 4.0 (H100/H200)")):
        link = load_link(f"nvlink{gen}")
        assert link.link_count == ref[(row, "links_per_gpu")]
        assert link.bandwidth_bytes_per_s == pytest.approx(
            ref[(row, "total_bw_per_gpu_bidir")] / 2 * 1e9)
    assert load_link("nvswitch-gen3").bandwidth_bytes_per_s * 8 == pytest.approx(
        ref[("NVSwitch gen3 (HGX H100)", "node_bisection_bw")] * 1e12)
    assert load_link("nvswitch-gen2").switch_count == ref[
        ("NVSwitch gen2 (HGX A100)", "switches_per_8gpu_node")]
    assert load_link("infiniband-ndr-400g").bandwidth_bytes_per_s == pytest.approx(
        ref[("InfiniBand NDR", "port_bw_full_duplex")] * 1e9)
    assert load_link("infiniband-hdr-200g").bandwidth_bytes_per_s * 8 == pytest.approx(
        ref[("InfiniBand HDR", "link_rate")] * 1e9)
    assert load_link("ethernet-25g").latency_s == pytest.approx(
        ref[("TCP/IP kernel stack", "kernel_to_kernel_latency")] * 1e-6)


def test_storage_matches_reference(ref: dict[tuple[str, str], float]) -> None:
    for name, row in (("nvme-gen4", "Samsung PM1735 (PCIe Gen4 NVMe)"),
                      ("nvme-gen5", "Samsung PM1743 (PCIe Gen5 NVMe)")):
        medium = load_storage(name)
        assert medium.read_bandwidth_bytes_per_s == ref[(row, "seq_read")] * 1e6
        assert medium.random_read_4k_iops == ref[(row, "random_read_4k")]
    sata = load_storage("sata-ssd")
    evo = "Samsung 870 EVO (SATA SSD)"
    assert sata.read_bandwidth_bytes_per_s == ref[(evo, "seq_read")] * 1e6
    assert sata.random_read_4k_iops == ref[(evo, "random_read_4k_qd32")]
    assert sata.request_latency_s == pytest.approx(1 / ref[(evo, "random_read_4k_qd1")],
                                                   rel=1e-3)
    hdd = load_storage("hdd")
    assert hdd.read_bandwidth_bytes_per_s == ref[
        ("Seagate Exos X18 (7200 rpm HDD)", "max_sustained_transfer")] * 1e6
    nas = load_storage("nas-nfs")
    assert nas.read_bandwidth_bytes_per_s == ref[
        ("NetApp AFF A900 2-node (NFS, SPECstorage swbuild)", "peak_throughput")] * 1e6
    assert load_storage("object-store").random_read_4k_iops == ref[
        ("Amazon S3 (standard, general purpose bucket)", "get_head_rate")]


def test_datasets_match_reference(ref: dict[tuple[str, str], float]) -> None:
    inet = "ImageNet-1k (ILSVRC2012)"
    raw, records = load_dataset("imagenet-raw"), load_dataset("imagenet-records")
    assert raw.sample_count == records.sample_count == ref[(inet, "train_images")]
    assert raw.file_size_mean_bytes == pytest.approx(
        ref[(inet, "mean_train_jpeg_size")] * 1e3, rel=0.01)
    layout = "ImageNet TFRecord layout (tensorflow/tpu imagenet_to_gcs.py)"
    assert records.file_count == ref[(layout, "train_shards")]
    assert records.file_size_mean_bytes == pytest.approx(
        ref[(layout, "train_shard_size")] * 1e6, rel=0.01)
    # the whole epoch reads the same bytes either way
    assert records.total_bytes == pytest.approx(raw.total_bytes, rel=1e-6)
    decode_rates = [value for (name, field), value in ref.items()
                    if name.startswith("JPEG decode cost") and field.startswith("decode_rate")]
    assert len(decode_rates) == 9
    median_ms = 1e3 / statistics.median(decode_rates)
    for name in ("imagenet-raw", "imagenet-records", "mlperf-resnet50"):
        assert load_dataset(name).prep_s_per_sample_per_core == pytest.approx(
            median_ms * 1e-3, rel=1e-3)


def test_every_cited_tag_is_in_the_reference() -> None:
    rows = _reference_rows()
    known = {tag for row in rows for tag in re.findall(r"\[([A-Z0-9_]+)\]", row["source"])}
    md = REFERENCE / "hardware_specs.md"
    known |= set(re.findall(r"\*\*\[([A-Z0-9_]+)\]\*\*", md.read_text()))
    for folder, loader in LOADERS.items():
        for name in AVAILABLE[folder]():
            for path, text in loader(name).sources.items():
                for tag in re.findall(r"\[([A-Z0-9_]+)\]", text):
                    assert tag in known, f"{folder}/{name}: sources.{path} cites unknown [{tag}]"


# ---------------------------------------------------------------- bad files

def _toml_value(v: Any) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return json.dumps(v)


def _dump(table: dict[str, Any], prefix: str = "") -> str:
    """Minimal TOML writer for the profiles' shapes (scalars and nested tables)."""
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()
             if not isinstance(v, dict)]
    for key, value in table.items():
        if isinstance(value, dict):
            name = f"{prefix}{json.dumps(key)}"
            lines += ["", f"[{name}]", _dump(value, name + ".")]
    return "\n".join(lines)


def _write(tmp_path: Path, folder: str, base: str, edit: dict[str, Any],
           drop: tuple[str, ...] = (), fname: str = "bad.toml") -> Path:
    """A copy of built-in `folder/base` with dotted keys in `edit` set and in `drop` removed."""
    data = tomllib.loads(builtin_files("hw_profiles", f"{folder}/*.toml")[base].read_text())
    for dotted, value in edit.items():
        *parents, last = dotted.split("|")
        node = data
        for p in parents:
            node = node[p]
        node[last] = value
    for dotted in drop:
        *parents, last = dotted.split("|")
        node = data
        for p in parents:
            node = node[p]
        del node[last]
    path = tmp_path / fname
    path.write_text(_dump(data))
    return path


def _expect(path: Path, loader: Any, field: str, value: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        loader(path)
    err = info.value
    assert (err.source, err.field, err.value) == (str(path), field, value), str(err)
    if field == "<file>":  # a file-level problem: the message is "PATH: problem"
        assert str(err).startswith(f"{path}: ")
    else:
        assert str(path) in str(err) and field in str(err) and repr(value) in str(err)
    return err


BAD_FILES = [
    # (folder, base, edit, drop, field, value)
    ("links", "pcie-gen4-x16", {"bandwith_gb_s": 3.0}, (), "bandwith_gb_s", 3.0),
    ("links", "pcie-gen4-x16", {}, ("latency_us",), "latency_us", None),
    ("links", "pcie-gen4-x16", {"bandwidth_gb_s_per_direction": "fast"}, (),
     "bandwidth_gb_s_per_direction", "fast"),
    ("links", "pcie-gen4-x16", {"latency_us": True}, (), "latency_us", True),
    ("links", "pcie-gen4-x16", {"bandwidth_gb_s_per_direction": 0.0}, (),
     "bandwidth_gb_s_per_direction", 0.0),
    ("links", "pcie-gen4-x16", {"latency_us": -1.0}, (), "latency_us", -1.0),
    ("links", "pcie-gen4-x16", {"lanes": 16.5}, (), "lanes", 16.5),
    ("links", "pcie-gen4-x16", {"achieved_efficiency": 1.5}, (), "achieved_efficiency", 1.5),
    ("links", "pcie-gen4-x16", {"kind": "smoke-signals"}, (), "kind", "smoke-signals"),
    ("links", "pcie-gen4-x16", {"lanes": 8}, (), "bandwidth_gb_s_per_direction", 31.5),
    ("links", "nvlink3", {"link_count": 6}, (), "bandwidth_gb_s_per_direction", 300.0),
    ("links", "pcie-gen4-x16", {}, ("sources|latency_us",), "latency_us", 1.0),
    ("links", "pcie-gen4-x16", {"sources|colour": "[PCIE_NOTES]"}, (), "sources.colour",
     "[PCIE_NOTES]"),
    ("links", "pcie-gen4-x16", {"sources|lanes": "trust me"}, (), "sources.lanes", "trust me"),
    ("links", "pcie-gen4-x16", {"sources|lanes": "not found: x"}, (), "sources.lanes",
     "not found: x"),
    ("storage", "nvme-gen4", {"max_concurrency": 0}, (), "max_concurrency", 0),
    ("storage", "nvme-gen4", {}, ("read_bandwidth_mb_s",), "read_bandwidth_mb_s", None),
    ("datasets", "imagenet-raw", {"file_size_mean_bytes": -5.0}, (), "file_size_mean_bytes",
     -5.0),
    ("links", "usb3", {"latency_us": float("inf")}, (), "latency_us", float("inf")),
    ("datasets", "imagenet-raw", {"file_count": 10}, (), "file_count", 10),
    ("datasets", "imagenet-records", {"file_size_stdev_bytes": 3.0}, (),
     "file_size_stdev_bytes", 3.0),
    ("datasets", "imagenet-raw", {"prep_ms_per_sample_per_core": float("nan")}, (),
     "prep_ms_per_sample_per_core", None),  # NaN != NaN: value checked below by name only
    ("systems", "dgx-a100", {"host|sockets": 0}, (), "host.sockets", 0),
    ("systems", "dgx-a100", {"host|dram_gb": "lots"}, (), "host.dram_gb", "lots"),
    ("systems", "dgx-a100", {"links|host_to_device": "pcie-gen9"}, (), "links.host_to_device",
     "pcie-gen9"),
    ("systems", "dgx-a100", {}, ("links|device_to_device", "sources|links.device_to_device"),
     "links.device_to_device", None),
    ("systems", "dgx-a100", {}, ("links|nic_count", "sources|links.nic_count"),
     "links.nic_count", None),
    ("systems", "workstation", {"gpudirect_storage": True}, (), "gpudirect_storage", True),
    ("systems", "edge-device", {"host|cores": 9}, (), "host.cores", 9),
    ("systems", "edge-device", {"host|cpu|clock_ghz": 0}, (), "host.cpu.clock_ghz", 0),
    ("systems", "edge-device", {}, ("sources|host.cpu.cores",), "host.cpu.cores", 4),
]


@pytest.mark.parametrize("folder,base,edit,drop,field,value", BAD_FILES,
                         ids=[f"{b[1]}:{b[4]}" for b in BAD_FILES])
def test_bad_file_names_file_field_value(tmp_path: Path, folder: str, base: str,
                                         edit: dict[str, Any], drop: tuple[str, ...],
                                         field: str, value: Any) -> None:
    path = _write(tmp_path, folder, base, edit, drop)
    if value is None and field == "prep_ms_per_sample_per_core":
        with pytest.raises(ConfigError, match="prep_ms_per_sample_per_core") as info:
            load_dataset(path)
        assert info.value.source == str(path) and math.isnan(info.value.value)
        return
    _expect(path, LOADERS[folder], field, value)


def test_malformed_and_missing_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("kind = \n")
    _expect(broken, load_link, "<file>", str(broken))
    missing = tmp_path / "missing.toml"
    _expect(missing, load_storage, "<file>", str(missing))
    no_sources = _write(tmp_path, "links", "usb3", {}, ("sources",))
    _expect(no_sources, load_link, "sources", None)


def test_user_files_and_relative_references(tmp_path: Path) -> None:
    link = _write(tmp_path, "links", "pcie-gen4-x16", {"latency_us": 2.0}, fname="my-link.toml")
    assert load_link(link).latency_s == 2e-6 and load_link(str(link)).name == "my-link"
    system = _write(tmp_path, "systems", "workstation", {"links|host_to_device": "my-link.toml"},
                    fname="my-box.toml")
    box = load_system(system)
    assert box.name == "my-box" and box.host_to_device.latency_s == 2e-6
    bad_link = _write(tmp_path, "links", "pcie-gen4-x16", {"latency_us": -2.0},
                      fname="bad-link.toml")
    system = _write(tmp_path, "systems", "workstation",
                    {"links|host_to_device": "bad-link.toml"}, fname="box2.toml")
    _expect(bad_link, lambda _: load_system(system), "latency_us", -2.0)
