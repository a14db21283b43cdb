"""Workloads stated as inference-perf profiles (kubernetes-sigs/inference-perf): stages of a
constant or Poisson rate, and shared-prefix data (groups sharing a system prompt).

The profile's fields and what the simulator makes of them (inference-perf ``config.py``,
``datagen/shared_prefix_datagen.py``, ``loadgen/load_timer.py``, ``loadgen/load_generator.py``)::

    load.type: constant | poisson     stage k sends int(rate x duration) requests:
    load.stages: [{rate, duration}]     constant: exponential gaps scaled to sum to the duration
                                        poisson: exponential gaps at the rate
    load.interval (default 1 s)       stage k+1 starts interval + 1 s after stage k's duration
    data.shared_prefix:
      num_groups (num_unique_system_prompts)      G system prompts of system_prompt_len tokens
      num_prompts_per_group (num_users_per_...)   U questions per group, question_len tokens
      question_len, output_len                    output_len tokens generated (ignore_eos)
      enable_multi_turn_chat                      read; rounds are sent as single prompts

    prompts: the G x U (system prompt + question) pairs, shuffled once (seeded); request j of a
             stage sends prompt j mod (G x U), so every prompt recurs every G x U requests

``questions=Questions.UNIQUE`` gives every request a question of its own instead (the reading
of the benchmark's other simulators).

NOTE: inference-perf starts a stage once the previous one has drained; here it starts a fixed
``interval + 1 s`` after the previous stage's last arrival window, without waiting for the
drain. Multi-turn sessions (a user's rounds carry the growing history, each round waiting for
the last) are sent as independent single-turn prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ridgeline.errors import ConfigError
from ridgeline.sim.kinds import LoadKind, Questions
from ridgeline.sim.workload import RequestSpec, output_tokens, prompt_tokens
from ridgeline.specs.inputs import check_int, check_real, parse_json, read_text
from ridgeline.specs.limits import MAX_CONTEXT, MAX_RATE_PER_S, MAX_REQUESTS, MAX_SECONDS

STAGE_START_DELAY_S = 1.0  # load_generator.run_stage: start_time = perf_counter() + 1


@dataclass(frozen=True, slots=True)
class Stage:
    """Requests at ``rate_per_s`` for ``duration_s`` seconds."""

    rate_per_s: float
    duration_s: float

    def __post_init__(self) -> None:
        check_real("stage.rate", self.rate_per_s, 0, MAX_RATE_PER_S, low_open=True)
        check_real("stage.duration", self.duration_s, 0, MAX_SECONDS, low_open=True)

    @property
    def num_requests(self) -> int:
        return int(self.rate_per_s * self.duration_s)


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """``num_groups`` system prompts, each with ``prompts_per_group`` questions."""

    num_groups: int = 10
    prompts_per_group: int = 10
    system_prompt_len: int = 100
    question_len: int = 50
    output_len: int = 50
    multi_turn: bool = False

    def __post_init__(self) -> None:
        check_int("shared_prefix.num_groups", self.num_groups, 1, MAX_REQUESTS)
        check_int("shared_prefix.num_prompts_per_group", self.prompts_per_group, 1, MAX_REQUESTS)
        check_int("shared_prefix.system_prompt_len", self.system_prompt_len, 0, MAX_CONTEXT)
        check_int("shared_prefix.question_len", self.question_len, 1, MAX_CONTEXT)
        check_int("shared_prefix.output_len", self.output_len, 1, MAX_CONTEXT)

    @property
    def num_prompts(self) -> int:
        return self.num_groups * self.prompts_per_group


@dataclass(frozen=True, slots=True)
class Profile:
    """An inference-perf profile: load stages and shared-prefix data (module docstring)."""

    stages: tuple[Stage, ...]
    data: SharedPrefix
    load: LoadKind = LoadKind.CONSTANT
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        if not self.stages:
            raise ConfigError("field load.stages: at least one stage")
        if sum(s.num_requests for s in self.stages) > MAX_REQUESTS:
            raise ConfigError(f"field load.stages: more than {MAX_REQUESTS:,} requests")
        check_real("load.interval", self.interval_s, 0, MAX_SECONDS)

    @property
    def num_requests(self) -> int:
        return sum(s.num_requests for s in self.stages)


_ALIASES = {
    "num_unique_system_prompts": "num_groups",
    "num_users_per_system_prompt": "num_prompts_per_group",
}
_SHARED_FIELDS = (
    "num_groups",
    "num_prompts_per_group",
    "system_prompt_len",
    "question_len",
    "output_len",
    "enable_multi_turn_chat",
)


def _shared_prefix(raw: Any) -> SharedPrefix:
    if not isinstance(raw, Mapping):
        raise ConfigError("field data.shared_prefix: expected a table of its fields")
    fields = {_ALIASES.get(str(k), str(k)): v for k, v in raw.items()}
    unknown = sorted(set(fields) - set(_SHARED_FIELDS) - {"seed"})
    if unknown:
        raise ConfigError(f"field data.shared_prefix.{unknown[0]}: not a shared_prefix field")
    multi = fields.pop("enable_multi_turn_chat", False)
    fields.pop("seed", None)
    if not isinstance(multi, bool):
        raise ConfigError("field data.shared_prefix.enable_multi_turn_chat: true or false")
    kwargs = {
        ("prompts_per_group" if k == "num_prompts_per_group" else k): v for k, v in fields.items()
    }
    return SharedPrefix(**kwargs, multi_turn=multi)


def _stages(raw: Any) -> tuple[Stage, ...]:
    if not isinstance(raw, list):
        raise ConfigError("field load.stages: expected a list of {rate, duration}")
    out = []
    for k, s in enumerate(raw):
        if not isinstance(s, Mapping) or set(s) - {"rate", "duration"}:
            raise ConfigError(f"field load.stages[{k}]: expected {{rate, duration}}")
        try:
            out.append(Stage(float(s["rate"]), float(s["duration"])))
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"field load.stages[{k}]: rate and duration are numbers") from None
    return tuple(out)


def parse_profile(data: Any) -> Profile:
    """A ``Profile`` from a parsed inference-perf config (JSON or YAML).

    Raises:
        ConfigError: naming the field that is missing, malformed or not supported.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("inference-perf profile: expected a table with load and data")
    load, dat = data.get("load"), data.get("data")
    if not isinstance(load, Mapping) or not isinstance(dat, Mapping):
        raise ConfigError("inference-perf profile: fields load and data are required")
    kind = str(load.get("type", "constant"))
    if kind not in LoadKind.__members__.values():
        raise ConfigError(f"field load.type: {kind!r} not supported (constant, poisson)")
    dtype = dat.get("type", "shared_prefix")
    if dtype != "shared_prefix" or "shared_prefix" not in dat:
        raise ConfigError(f"field data.type: {dtype!r} not supported (shared_prefix)")
    interval = load.get("interval", 1.0)
    if isinstance(interval, bool) or not isinstance(interval, int | float):
        raise ConfigError("field load.interval: a number of seconds")
    return Profile(
        _stages(load.get("stages")),
        _shared_prefix(dat["shared_prefix"]),
        LoadKind(kind),
        float(interval),
    )


def load_profile(path: str | Path) -> Profile:
    """Read an inference-perf profile file: JSON, or YAML when PyYAML is installed."""
    text = read_text(path, "inference-perf profile")
    try:
        data = parse_json(text, str(path))
    except ConfigError:
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"{path}: not JSON, and PyYAML is not installed") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return parse_profile(data)


def _stage_arrivals(stage: Stage, kind: LoadKind, rng: np.random.Generator) -> np.ndarray:
    """Send times within a stage (seconds from its start)."""
    n = stage.num_requests
    gaps = rng.exponential(1.0 / stage.rate_per_s, n)
    if kind is LoadKind.CONSTANT and n:
        gaps *= stage.duration_s / float(gaps.sum())  # ConstantLoadTimer: sum = duration
    return np.cumsum(gaps)


def profile_requests(
    profile: Profile, seed: int = 0, questions: Questions = Questions.CYCLED
) -> list[RequestSpec]:
    """The requests of ``profile`` in arrival order (module docstring)."""
    rng = np.random.default_rng(seed)
    sp = profile.data
    order = rng.permutation(sp.num_prompts)  # the shuffled prompt list, drawn once
    out: list[RequestSpec] = []
    start = 0.0
    for stage in profile.stages:
        for j, t in enumerate(_stage_arrivals(stage, profile.load, rng)):
            i = len(out)
            p = int(order[j % sp.num_prompts])
            question = p if questions is Questions.CYCLED else sp.num_prompts + i
            prompt = prompt_tokens(
                question, sp.question_len, p // sp.prompts_per_group, sp.system_prompt_len
            )
            out.append(
                RequestSpec(f"r{i}", start + float(t), prompt, output_tokens(i, sp.output_len))
            )
        start += stage.duration_s + profile.interval_s + STAGE_START_DELAY_S
    return out
