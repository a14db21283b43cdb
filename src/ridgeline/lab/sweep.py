"""Decode sweeps: batch × context × backend, each point measured once and stored at once.

The sweep asks the store before measuring each point and writes each result the moment it exists,
so an interrupted sweep rerun skips what is stored and measures only the rest. Models are built
once per (attention, dtype) and reused across points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import product

from ridgeline.errors import ConfigError
from ridgeline.lab import env as lab_env
from ridgeline.lab.configs import raw_config, with_positions
from ridgeline.lab.decode import measure_point
from ridgeline.lab.hf import LabModel, build_model
from ridgeline.lab.points import PointConfig
from ridgeline.lab.store import ResultsStore

KIND = "decode"
DEFAULT_BACKENDS = ("hf:dynamic:sdpa", "hf:static:sdpa")


@dataclass(frozen=True, slots=True)
class Backend:
    """``hf:dynamic:sdpa`` — engine, cache kind, attention implementation."""

    backend: str
    cache: str
    attn: str

    @classmethod
    def parse(cls, text: str) -> Backend:
        parts = text.split(":")
        if parts[0] == "ridgeline":  # the engine: paged KV blocks, its own paged attention
            return cls("ridgeline", "paged", "paged")
        if len(parts) != 3 or parts[0] != "hf":
            raise ConfigError(
                f"field --backend: '{text}' is not hf:<dynamic|static>:<sdpa|eager> or ridgeline"
            )
        return cls(*parts)


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A grid of points: every backend × batch × context, with the shared settings in ``base``."""

    backends: tuple[Backend, ...]
    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    base: PointConfig

    def points(self) -> list[PointConfig]:
        return [
            replace(self.base, backend=b.backend, cache=b.cache, attn=b.attn, batch=n, context=t)
            for b, n, t in product(self.backends, self.batches, self.contexts)
        ]


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    measured: int
    skipped: int
    total: int


Progress = Callable[[PointConfig, str], None]  # (point, "measured" | "skipped")


def run_sweep(
    spec: SweepSpec, store: ResultsStore, progress: Progress | None = None
) -> SweepOutcome:
    """Measure every point of ``spec`` not yet in ``store``; each result is committed at once."""
    allocator = lab_env.allocator_settings()
    points = [replace(p, allocator=allocator) for p in spec.points()]
    models: dict[tuple[str, str, str], LabModel] = {}
    need_positions = max(spec.contexts) + spec.base.decode_tokens + 1
    raw = with_positions(raw_config(spec.base.model), need_positions)
    measured = skipped = 0
    for cfg in points:
        if store.has(KIND, cfg.to_dict()):
            skipped += 1
            if progress:
                progress(cfg, "skipped")
            continue
        env = lab_env.capture(cfg.threads, _device_name(cfg.device))
        if cfg.backend == "ridgeline":
            from ridgeline.lab.engine_backend import measure_engine_point

            result = measure_engine_point(cfg)
        else:
            key = (cfg.attn, cfg.dtype, cfg.device)
            if key not in models:
                models[key] = build_model(
                    raw, cfg.model, cfg.attn, cfg.dtype, cfg.device, cfg.weights, cfg.seed
                )
            result = measure_point(models[key], cfg)
        store.put(KIND, cfg.to_dict(), env.to_dict(), result.to_dict())
        measured += 1
        if progress:
            progress(cfg, "measured")
    return SweepOutcome(measured, skipped, len(points))


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({lab_env.cpu_model()})"


def parse_ints(text: str, name: str) -> tuple[int, ...]:
    """``"1,4,16"`` → (1, 4, 16); ConfigError naming the option otherwise."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"field {name}: expected integers like 1,4,16, got '{text}'") from None
    if not values or min(values) < 1:
        raise ConfigError(f"field {name}: expected positive integers, got '{text}'")
    return values


def parse_backends(texts: Sequence[str]) -> tuple[Backend, ...]:
    return tuple(Backend.parse(t) for t in texts)
