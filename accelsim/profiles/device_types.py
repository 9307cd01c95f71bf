"""The frozen dataclasses a device profile loads into. SI units throughout: bytes, bytes/s, Hz,
W, FLOP/s (for int8, OP/s: one multiply-accumulate = 2 ops). See `accelsim.profiles.devices` for
the TOML schema and how its units convert. Instances are picklable; they are not hashable
(they hold dicts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from accelsim.errors import UnknownNameError
from accelsim.profiles.device_schema import PRECISIONS
from accelsim.schema import flagged_fields


@dataclass(frozen=True)
class OverlaySpec:
    """A DPU-like int8 convolution engine built in FPGA fabric: `cores` independent cores, each
    `images_per_core` batch engines (one image each, sharing the core's weight fetch; None: 1)
    of a pixel x input-channel x output-channel MAC array."""

    name: str
    cores: int
    pixel_parallelism: int
    input_channel_parallelism: int
    output_channel_parallelism: int
    clock_hz: float
    images_per_core: int | None = None

    @property
    def batch_engines(self) -> int:
        """Images one core processes at once (its batch engines)."""
        return self.images_per_core or 1

    @property
    def engines(self) -> int:
        """PP x ICP x OCP arrays over all cores."""
        return self.cores * self.batch_engines

    @property
    def macs_per_cycle(self) -> int:
        """int8 MACs per clock over all cores."""
        per_engine = (
            self.pixel_parallelism * self.input_channel_parallelism
            * self.output_channel_parallelism
        )
        return self.engines * per_engine

    @property
    def peak_int8_ops_per_s(self) -> float:
        """Peak int8 OP/s (2 ops per MAC) of the whole overlay."""
        return 2.0 * self.macs_per_cycle * self.clock_hz


@dataclass(frozen=True)
class ComputeSpec:
    """Compute units. Peak tables map precision -> FLOP/s (OP/s for int8); `matrix` is the
    matrix engine (tensor cores, MXU, AMX, NPU MAC array, FPGA DSP fabric), `vector` the SIMD /
    CUDA-core path. A precision missing from a table is not supported on that path."""

    clock_hz: float | None = None
    base_clock_hz: float | None = None
    max_turbo_clock_hz: float | None = None
    all_core_turbo_clock_hz: float | None = None
    single_thread_equiv_clock_hz: float | None = None  # cpu: drives framework host time
    sm_count: int | None = None
    cuda_cores: int | None = None
    tensor_cores: int | None = None
    cores: int | None = None
    threads: int | None = None
    sockets: int | None = None
    simd_width_bits: int | None = None
    fma_units_per_core: int | None = None
    mxu_rows: int | None = None
    mxu_cols: int | None = None
    mxu_count: int | None = None
    dataflow: str | None = None  # systolic arrays: "ws" | "os" | "is" (None: weight-stationary)
    dsp_slices: int | None = None
    luts: int | None = None
    slr_count: int | None = None
    mac_count: int | None = None
    supported_ops: tuple[str, ...] | None = None
    zero_operand_gating: bool | None = None  # MACs with a zero operand spend no energy
    matrix_peak_flops_per_s: dict[str, float] = field(default_factory=dict)
    matrix_sparse_peak_flops_per_s: dict[str, float] = field(default_factory=dict)
    vector_peak_flops_per_s: dict[str, float] = field(default_factory=dict)
    macs_per_dsp: dict[str, int] = field(default_factory=dict)
    overlay: OverlaySpec | None = None


@dataclass(frozen=True)
class OnchipMemorySpec:
    """On-chip memories, bytes. Per-SM sizes are per SM (or per AMD CU)."""

    l2_cache_bytes: int | None = None
    l3_cache_bytes: int | None = None
    shared_mem_per_sm_bytes: int | None = None
    register_file_per_sm_bytes: int | None = None
    unified_buffer_bytes: int | None = None
    accumulator_bytes: int | None = None
    vmem_bytes: int | None = None
    unified_buffer_bandwidth_bytes_per_s: float | None = None
    bram_bytes: int | None = None
    uram_bytes: int | None = None
    sram_bytes: int | None = None

    @property
    def capacity_bytes(self) -> int | None:
        """Sum of the device-wide memories (caches, buffers, BRAM/URAM, SRAM; not the per-SM
        ones), or None when the profile publishes none."""
        sizes = [
            self.l2_cache_bytes, self.l3_cache_bytes, self.unified_buffer_bytes,
            self.accumulator_bytes, self.vmem_bytes, self.bram_bytes, self.uram_bytes,
            self.sram_bytes,
        ]
        present = [s for s in sizes if s is not None]
        return sum(present) if present else None


@dataclass(frozen=True)
class SramSpec:
    """A systolic array's operand memories as SCALE-Sim models them (`accelsim.devices.
    systolic_sram`): double-buffered ifmap, filter and ofmap SRAMs, in words (one operand
    element each, whatever the precision: SCALE-Sim has no numeric format), each with its own
    DRAM port, in words per cycle."""

    ifmap_words: int
    filter_words: int
    ofmap_words: int
    ifmap_words_per_cycle: float
    filter_words_per_cycle: float
    ofmap_words_per_cycle: float


@dataclass(frozen=True)
class OffchipMemorySpec:
    """Device DRAM. `technology` keys the energy constants; `capacity_bytes` is None only on CPUs
    whose maximum supported memory is unpublished (on CPUs it is the maximum, not installed)."""

    technology: str
    bandwidth_bytes_per_s: float
    capacity_bytes: int | None = None
    bus_width_bits: int | None = None
    channels: int | None = None


@dataclass(frozen=True)
class HostLinkSpec:
    """Link to the host CPU; bandwidth is per direction (theoretical)."""

    kind: str
    bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class PeerLinkSpec:
    """Device-to-device links (NVLink, TPU ICI); bandwidth per link, per direction."""

    kind: str
    per_link_bandwidth_bytes_per_s: float
    links: int | None = None

    @property
    def total_bandwidth_bytes_per_s(self) -> float | None:
        """All links together, per direction; None when the link count is unpublished."""
        return None if self.links is None else self.links * self.per_link_bandwidth_bytes_per_s


@dataclass(frozen=True)
class PowerSpec:
    """Power figures, W. `tdp_w` is the power envelope (the top mode on configurable parts)."""

    tdp_w: float
    idle_w: float | None = None
    min_w: float | None = None
    measured_min_w: float | None = None
    measured_mean_w: float | None = None
    measured_max_w: float | None = None
    limits_clock: bool | None = None  # False: an unknown limit, which does not throttle


@dataclass(frozen=True)
class DeviceProfile:
    """One device SKU, as loaded from `hw_profiles/devices/<name>.toml` (or a user file)."""

    name: str
    device_class: str
    display_name: str
    vendor: str
    source_path: str
    compute: ComputeSpec
    onchip_memory: OnchipMemorySpec
    power: PowerSpec
    offchip_memory: OffchipMemorySpec | None = None
    secondary_memory: OffchipMemorySpec | None = None
    host_link: HostLinkSpec | None = None
    peer_link: PeerLinkSpec | None = None
    notes: str | None = None
    inference_only: bool | None = None  # None: not stated (decided from its formats)
    process_node_nm: int | None = None  # the foundry node's marketing name, nm
    sources: dict[str, str] = field(default_factory=dict)
    # Systolic arrays read from a SCALE-Sim .cfg: their SRAMs, timed by the SRAM model.
    operand_srams: SramSpec | None = None

    def peak_flops_per_s(
        self, precision: str, tensor: bool = True, sparse: bool = False
    ) -> float | None:
        """Peak FLOP/s (OP/s for int8) at `precision` on the matrix engine (`tensor=True`) or the
        vector path, dense unless `sparse`; None where the device has no such figure.

        >>> load_profile("a100").peak_flops_per_s("bf16")  # doctest: +SKIP
        312000000000000.0
        """
        if precision not in PRECISIONS:
            raise UnknownNameError("precision", precision, list(PRECISIONS))
        if not tensor:
            return None if sparse else self.compute.vector_peak_flops_per_s.get(precision)
        table = (
            self.compute.matrix_sparse_peak_flops_per_s if sparse
            else self.compute.matrix_peak_flops_per_s
        )
        return table.get(precision)

    def supported_precisions(self, tensor: bool = True) -> tuple[str, ...]:
        """Precisions with a dense peak on the matrix engine (or the vector path), in
        PRECISIONS order."""
        table = (
            self.compute.matrix_peak_flops_per_s if tensor
            else self.compute.vector_peak_flops_per_s
        )
        return tuple(p for p in PRECISIONS if p in table)

    def flagged_fields(self) -> tuple[str, ...]:
        """Dotted paths of fields resting on a proxy, an unverified recollection or an assumption
        (sources starting "proxy:", "unverified:", "assumed:"), for reports to show."""
        return flagged_fields(self.sources)
