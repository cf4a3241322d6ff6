"""Flow-size distributions and Poisson flow plans for background datacenter traffic.

Design:

- Flow sizes follow one of the published datacenter CDFs kept in the repo's
  ``traffic/cdf/*.txt`` (Facebook Hadoop and Cache Follower from Roy et al.,
  SIGCOMM 2015; web search from DCTCP, SIGCOMM 2010; data mining from VL2,
  SIGCOMM 2009). Each file names its source and digitisation in its header.
  PA-ATP injects Hadoop flows as background traffic at loads 0.2-0.8.
- Sampling rule (the HPCC traffic generator's, alibaba-edu/High-Precision-
  Congestion-Control ``traffic_gen``): inverse CDF with linear interpolation
  between the points. A uniform draw below the first point's fraction maps to
  the first size (an atom there; the Homa tables start above 0). Draws are
  rounded to the nearest byte and raised to at least 1 byte; nothing else is
  truncated. ``mean_bytes`` is the exact mean of that piecewise-linear inverse
  CDF (rounding moves it by well under a byte).
- Arrivals (HPCC rule): per sending host a Poisson process with rate
  lambda = load * host_link_bps / (8 * mean_flow_bytes); each flow's
  destination is uniform among the receivers other than the sender.

Every random draw comes from ``numpy.random.default_rng`` seeded by the caller
(``plan_flows`` derives one stream per sender from ``(seed, sender_index)``,
and one per further minute of the window, see ``PLAN_MINUTE_S``), so a plan is
a pure function of its arguments.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Sequence, Tuple, Union

import numpy as np

CDF_DIR = Path(__file__).resolve().parents[2] / "traffic" / "cdf"


#: A background entry's ``distribution`` that names no flow-size CDF: one UDP flow per (sender, receiver)
#: at a constant rate (PA-ATP §V-B's background UDP flow), sent by ``testbed.traffic.flowgen``'s
#: ``udp-source`` role in datagrams of ``CONSTANT_DATAGRAM_BYTES`` of UDP payload: a 64-lane gradient's
#: payload, so that a switch queue, counted in packets, holds about as much time of either traffic.
CONSTANT_RATE = "constant"
CONSTANT_DATAGRAM_BYTES = 256


class UnknownDistributionError(ValueError):
    """A flow-size distribution name that has no file in ``traffic/cdf/``."""


def _validate_points(points: Sequence[Tuple[float, float]], where: Callable[[int], str]) -> None:
    """Check sizes >= 0 and non-decreasing, fractions in [0, 1] and non-decreasing, last = 1."""
    if not points:
        raise ValueError(f"{where(-1)}: no (size_bytes, cdf_fraction) points")
    for i, (size_bytes, fraction) in enumerate(points):
        if not (size_bytes >= 0 and np.isfinite(size_bytes)):
            raise ValueError(f"{where(i)}: size_bytes must be a finite number >= 0, got {size_bytes}")
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{where(i)}: cdf_fraction must be in [0, 1], got {fraction}")
        if i and size_bytes < points[i - 1][0]:
            raise ValueError(f"{where(i)}: size_bytes {size_bytes} is below the previous {points[i - 1][0]}")
        if i and fraction < points[i - 1][1]:
            raise ValueError(f"{where(i)}: cdf_fraction {fraction} is below the previous {points[i - 1][1]}")
    if points[-1][1] != 1.0:
        raise ValueError(f"{where(len(points) - 1)}: last cdf_fraction must be 1, got {points[-1][1]}")


@dataclass(frozen=True)
class FlowSizeCDF:
    """A flow-size CDF: ``points`` are (size_bytes, cdf_fraction), both non-decreasing, last fraction 1."""

    name: str
    points: Tuple[Tuple[float, float], ...]
    provenance: str = ""

    def __post_init__(self) -> None:
        _validate_points(self.points, lambda i: f"distribution {self.name!r} point {i}")

    @staticmethod
    def available() -> List[str]:
        """Names of the distributions shipped in ``traffic/cdf/``."""
        return sorted(p.stem for p in CDF_DIR.glob("*.txt"))

    @classmethod
    def load(cls, name_or_path: Union[str, Path]) -> "FlowSizeCDF":
        """Load a shipped distribution by name (``hadoop``) or any file by path (``x/y.txt``)."""
        text = str(name_or_path)
        if isinstance(name_or_path, Path) or "/" in text or text.endswith(".txt"):
            return cls._parse(Path(name_or_path))
        if text not in cls.available():
            raise UnknownDistributionError(
                f"unknown flow-size distribution {text!r}; available: {', '.join(cls.available())}"
            )
        return cls._parse(CDF_DIR / f"{text}.txt")

    @classmethod
    def _parse(cls, path: Path) -> "FlowSizeCDF":
        """Read ``# provenance`` lines, then ``size_bytes cdf_fraction`` lines."""
        provenance, points, line_numbers = [], [], []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                provenance.append(stripped.lstrip("#").strip())
                continue
            fields = stripped.split()
            try:
                if len(fields) != 2:
                    raise ValueError
                points.append((float(fields[0]), float(fields[1])))
            except ValueError:
                raise ValueError(f"{path}:{number}: expected 'size_bytes cdf_fraction', got {stripped!r}") from None
            line_numbers.append(number)
        _validate_points(points, lambda i: f"{path}:{line_numbers[i]}" if i >= 0 else str(path))
        return cls(name=path.stem, points=tuple(points), provenance=" ".join(provenance))

    def _arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        sizes_bytes, fractions = zip(*self.points)
        return np.asarray(sizes_bytes, dtype=float), np.asarray(fractions, dtype=float)

    def inverse(self, u: np.ndarray) -> np.ndarray:
        """Size in bytes (continuous) at cumulative fractions ``u`` in [0, 1]: linear between points."""
        sizes_bytes, fractions = self._arrays()
        u = np.asarray(u, dtype=float)
        if len(sizes_bytes) == 1:
            return np.full(u.shape, sizes_bytes[0])
        # hi is the first point whose fraction exceeds u; a draw below the first fraction clips to point 0.
        hi = np.clip(np.searchsorted(fractions, u, side="right"), 1, len(fractions) - 1)
        lo = hi - 1
        width = fractions[hi] - fractions[lo]
        t = np.clip(np.divide(u - fractions[lo], width, out=np.zeros_like(u), where=width > 0), 0.0, 1.0)
        return sizes_bytes[lo] + t * (sizes_bytes[hi] - sizes_bytes[lo])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` flow sizes (int64 bytes): inverse CDF of uniform draws, rounded, at least 1 byte."""
        sizes_bytes = np.rint(self.inverse(rng.random(n)))
        return np.maximum(sizes_bytes, 1).astype(np.int64)

    def mean_bytes(self) -> float:
        """Exact mean under ``inverse``: the atom at the first size plus a trapezoid per segment."""
        sizes_bytes, fractions = self._arrays()
        segments = np.diff(fractions) * (sizes_bytes[:-1] + sizes_bytes[1:]) / 2.0
        return float(fractions[0] * sizes_bytes[0] + segments.sum())

    def scaled(self, factor: float) -> "FlowSizeCDF":
        """This distribution with every size multiplied by ``factor`` (the fractions unchanged)."""
        if factor <= 0:
            raise ValueError(f"factor must be > 0, got {factor}")
        if factor == 1:
            return self
        return FlowSizeCDF(
            name=f"{self.name}_x{factor:g}",
            points=tuple((size_bytes * factor, fraction) for size_bytes, fraction in self.points),
            provenance=f"{self.provenance} Sizes multiplied by {factor:g}.",
        )

    def truncated(self, max_bytes: float) -> "FlowSizeCDF":
        """This distribution capped at ``max_bytes``: draws above it become ``max_bytes``."""
        sizes_bytes, fractions = self._arrays()
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes}")
        if max_bytes >= sizes_bytes[-1]:
            return self
        keep = int(np.searchsorted(sizes_bytes, max_bytes, side="right"))  # points with size <= max_bytes
        points = list(self.points[:keep])
        if keep and sizes_bytes[keep - 1] < max_bytes:
            t = (max_bytes - sizes_bytes[keep - 1]) / (sizes_bytes[keep] - sizes_bytes[keep - 1])
            points.append((float(max_bytes), float(fractions[keep - 1] + t * (fractions[keep] - fractions[keep - 1]))))
        points.append((float(max_bytes), 1.0))
        return FlowSizeCDF(
            name=f"{self.name}_max{int(max_bytes)}",
            points=tuple(points),
            provenance=f"{self.provenance} Capped at {int(max_bytes)} bytes (larger draws become {int(max_bytes)}).",
        )


def arrival_rate_per_s(load: float, link_rate_bps: float, mean_flow_bytes: float) -> float:
    """HPCC rule: flows per second that offer ``load`` of a ``link_rate_bps`` host link."""
    if not 0.0 < load <= 1.0:
        raise ValueError(f"load must be in (0, 1], got {load}")
    if link_rate_bps <= 0 or mean_flow_bytes <= 0:
        raise ValueError(f"link_rate_bps and mean_flow_bytes must be > 0, got {link_rate_bps}, {mean_flow_bytes}")
    return load * link_rate_bps / (8.0 * mean_flow_bytes)


def poisson_arrivals(rng: np.random.Generator, rate_per_s: float, duration_s: float) -> np.ndarray:
    """Sorted start times (s) of a Poisson process of ``rate_per_s`` on [0, duration_s).

    Drawn as a Poisson count followed by that many sorted uniform times, which is
    the same process as cumulated exponential gaps, in two vectorised draws.
    """
    if rate_per_s < 0 or duration_s < 0:
        raise ValueError(f"rate_per_s and duration_s must be >= 0, got {rate_per_s}, {duration_s}")
    count = rng.poisson(rate_per_s * duration_s)
    return np.sort(rng.uniform(0.0, duration_s, count))


@dataclass(frozen=True)
class PlannedFlow:
    """One planned background flow: ``sender`` sends ``size_bytes`` to ``receiver`` at ``start_s``."""

    sender: str
    receiver: str
    start_s: float
    size_bytes: int


#: A window's first PLAN_MINUTE_S are drawn as a whole (over the window, when shorter); each further
#: PLAN_MINUTE_S from its own stream, whole, and cut at the window's end. Lengthening a window past its
#: first minute (or the run_timeout an untimed background is planned over) then adds flows at its end
#: and changes none before them.
PLAN_MINUTE_S = 60.0


def plan_flows(
    cdf: FlowSizeCDF,
    load: float,
    link_rate_bps: float,
    duration_s: float,
    senders: Sequence[str],
    receivers: Sequence[str],
    seed: int,
) -> List[PlannedFlow]:
    """Background flows of every sender over ``[0, duration_s)``, sorted by start time.

    Each sender offers ``load`` of its ``link_rate_bps`` link (Poisson arrivals at
    ``arrival_rate_per_s``); sizes are drawn from ``cdf``; each destination is
    uniform among ``receivers`` other than the sender. Sender ``i`` draws its
    first minute (``PLAN_MINUTE_S``, or the whole window when shorter) from
    ``default_rng((seed, i))`` and minute ``k`` >= 1 from ``default_rng((seed, i,
    k))``, so the plan depends only on the arguments, and its flows before any
    time past the first minute do not depend on how long the window is.
    """
    rate_per_s = arrival_rate_per_s(load, link_rate_bps, cdf.mean_bytes())
    if duration_s <= 0:
        raise ValueError(f"duration_s must be > 0, got {duration_s}")
    minutes = math.ceil(duration_s / PLAN_MINUTE_S)     # at least 1: duration_s > 0
    flows: List[PlannedFlow] = []
    for index, sender in enumerate(senders):
        destinations = [r for r in receivers if r != sender]
        if not destinations:
            raise ValueError(f"sender {sender!r} has no receiver other than itself among {list(receivers)}")
        for minute in range(minutes):
            rng = np.random.default_rng((seed, index) if minute == 0 else (seed, index, minute))
            offset_s = minute * PLAN_MINUTE_S
            span_s = min(duration_s, PLAN_MINUTE_S) if minute == 0 else PLAN_MINUTE_S
            starts_s = offset_s + poisson_arrivals(rng, rate_per_s, span_s)
            sizes_bytes = cdf.sample(rng, len(starts_s))
            picks = rng.integers(len(destinations), size=len(starts_s))
            flows.extend(
                PlannedFlow(sender, destinations[pick], float(start_s), int(size_bytes))
                for start_s, size_bytes, pick in zip(starts_s, sizes_bytes, picks)
                if start_s < duration_s
            )
    flows.sort(key=lambda flow: flow.start_s)
    return flows
