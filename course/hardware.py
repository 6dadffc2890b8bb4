"""A catalog of accelerators: dense peak FLOP/s per dtype, memory bandwidth and capacity.

Every figure is the dense one (spec sheets often print the 2:4-sparse figure, twice as large)
and carries its source. Units are in the field names so a slip shows at the call site.
Bandwidths are decimal (a datasheet's GB/s is 1e9 bytes/s). A capacity is the datasheet's figure
read as GiB, the binary size the memory is built in ("80GB" as 80 GiB), with no reserve taken off:
the driver, the CUDA context and a serving engine each hold back some of it. That is what an A100
80GB reports (81,920 MiB); other cards report somewhat less than their entry, so for them it is an
upper bound. The H200 is the exception: its "141GB" is entered as the about 140 GiB it reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TERA = 1e12
GIGA = 1e9
GIB = 2 ** 30


@dataclass(frozen=True)
class Accelerator:
    """One piece of hardware as the roofline model sees it."""

    name: str
    peak_flops_per_s: dict[str, float]  # dense peak by dtype, e.g. {"bf16": 989e12}
    bandwidth_bytes_per_s: float  # main-memory (HBM/GDDR/DRAM) bandwidth
    memory_bytes: float  # main-memory capacity in bytes: the datasheet's GB read as GiB (see above)
    source: str  # where the figures come from
    l2_cache_bytes: float | None = None  # last-level on-chip cache, where published
    measured: bool = False  # True when the figures were measured on this machine, not looked up
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.peak_flops_per_s:
            raise ValueError(f"{self.name}: peak_flops_per_s needs at least one dtype")
        for dtype, flops in self.peak_flops_per_s.items():
            _require_positive(f"peak_flops_per_s[{dtype!r}]", flops)
        _require_positive("bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        _require_positive("memory_bytes", self.memory_bytes)

    def peak(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for `dtype`; a clear error if this hardware has no such figure."""
        key = _DTYPE_ALIASES.get(dtype, dtype)
        if key not in self.peak_flops_per_s:
            known = ", ".join(sorted(self.peak_flops_per_s))
            raise ValueError(f"{self.name} has no dense peak for dtype {dtype!r}; known: {known}")
        return self.peak_flops_per_s[key]


_DTYPE_ALIASES = {"fp16": "bf16", "float16": "bf16", "bfloat16": "bf16", "float32": "fp32"}


def _require_positive(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or value != value or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


# Dense figures from the vendors' datasheets; capacities the datasheet's GB read as GiB (module docstring).
# bf16 and fp16 share a tensor-core rate on all of these, so one "bf16" key serves both.
CATALOG: dict[str, Accelerator] = {
    a.name: a
    for a in [
        Accelerator(
            "A100 40GB SXM", {"bf16": 312 * TERA, "tf32": 156 * TERA, "fp32": 19.5 * TERA},
            1555 * GIGA, 40 * GIB, "NVIDIA A100 datasheet", l2_cache_bytes=40e6,
            aliases=("a100-40gb", "nvidia a100-sxm4-40gb"),
        ),
        Accelerator(
            "A100 80GB SXM", {"bf16": 312 * TERA, "tf32": 156 * TERA, "fp32": 19.5 * TERA},
            2039 * GIGA, 80 * GIB, "NVIDIA A100 datasheet", l2_cache_bytes=40e6,
            aliases=("a100", "a100-80gb", "nvidia a100-sxm4-80gb"),
        ),
        Accelerator(
            "A100 80GB PCIe", {"bf16": 312 * TERA, "tf32": 156 * TERA, "fp32": 19.5 * TERA},
            1935 * GIGA, 80 * GIB, "NVIDIA A100 datasheet", l2_cache_bytes=40e6,
            aliases=("a100-pcie", "nvidia a100 80gb pcie"),
        ),
        Accelerator(
            "H100 SXM", {"bf16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494.5 * TERA, "fp32": 67 * TERA},
            3350 * GIGA, 80 * GIB, "NVIDIA H100 datasheet", l2_cache_bytes=50e6,
            aliases=("h100", "nvidia h100 80gb hbm3", "nvidia h100"),
        ),
        Accelerator(
            "H100 PCIe", {"bf16": 756 * TERA, "fp8": 1513 * TERA, "tf32": 378 * TERA, "fp32": 51 * TERA},
            2000 * GIGA, 80 * GIB, "NVIDIA H100 datasheet", l2_cache_bytes=50e6,
            aliases=("h100-pcie", "nvidia h100 pcie"),
        ),
        Accelerator(
            "H200 SXM", {"bf16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494.5 * TERA, "fp32": 67 * TERA},
            # The datasheet's "141GB" is about 140 GiB as the card reports it.
            4800 * GIGA, 140 * GIB, "NVIDIA H200 datasheet", l2_cache_bytes=50e6,
            aliases=("h200", "nvidia h200"),  # not the H200 NVL: its dense peak is lower
        ),
        # The GH200 Grace Hopper Superchip's GPU: a Hopper GPU with the H100's tensor-core rates
        # (the datasheet prints the sparse ones, twice these), sold with two kinds of HBM. Neither is
        # the H200 (141 GB HBM3e at 4.8 TB/s).
        Accelerator(
            "GH200 96GB HBM3", {"bf16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494.5 * TERA, "fp32": 67 * TERA},
            4000 * GIGA, 96 * GIB, "NVIDIA GH200 Grace Hopper Superchip datasheet (96GB HBM3 version)",
            l2_cache_bytes=50e6, aliases=("gh200", "nvidia gh200 480gb"),
        ),
        Accelerator(
            "GH200 144GB HBM3e", {"bf16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494.5 * TERA, "fp32": 67 * TERA},
            4900 * GIGA, 144 * GIB, "NVIDIA GH200 Grace Hopper Superchip datasheet (144GB HBM3e version)",
            l2_cache_bytes=50e6, aliases=("gh200 hbm3e", "nvidia gh200 144g hbm3e"),
        ),
        Accelerator(
            "L4", {"bf16": 121 * TERA, "fp8": 242.5 * TERA}, 300 * GIGA, 24 * GIB,
            "NVIDIA L4 datasheet", aliases=("nvidia l4",),
        ),
        Accelerator(
            "A10", {"bf16": 125 * TERA}, 600 * GIGA, 24 * GIB, "NVIDIA A10 datasheet",
            aliases=("nvidia a10",),
        ),
        Accelerator(
            "RTX 4090", {"bf16": 165.2 * TERA, "fp8": 330.3 * TERA}, 1008 * GIGA, 24 * GIB,
            "NVIDIA Ada whitepaper (fp32 accumulate)", l2_cache_bytes=72e6,
            aliases=("nvidia geforce rtx 4090", "4090"),
        ),
        Accelerator(
            "MI300X", {"bf16": 1307.4 * TERA, "fp8": 2614.9 * TERA}, 5300 * GIGA, 192 * GIB,
            "AMD MI300X datasheet", aliases=("amd instinct mi300x",),
        ),
    ]
}


def _normalise(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").split())


def get_accelerator(name: str) -> Accelerator:
    """Look up an accelerator by its catalog name or a common alias (case-insensitive).

    An unknown name raises a ValueError listing the names the catalog knows.
    """
    if not isinstance(name, str):
        raise ValueError(f"accelerator name must be a string, got {name!r}")
    wanted = _normalise(name)
    for acc in CATALOG.values():
        if wanted == _normalise(acc.name) or wanted in (_normalise(a) for a in acc.aliases):
            return acc
    known = ", ".join(CATALOG)
    raise ValueError(f"unknown accelerator {name!r}; the catalog knows: {known}")


def list_accelerators() -> list[str]:
    """Catalog names in table order."""
    return list(CATALOG)
