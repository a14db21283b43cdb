"""inference-perf profiles: stages, shared-prefix data, and the requests they make."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ridgeline.errors import ConfigError
from ridgeline.sim.inference_perf import load_profile, parse_profile, profile_requests
from ridgeline.sim.kinds import LoadKind, Questions

# the shape of the sim-to-real benchmark's profiles (inference-perf's long aliases)
PROFILE = {
    "api": {"streaming": True, "type": "completion"},
    "data": {
        "type": "shared_prefix",
        "shared_prefix": {
            "enable_multi_turn_chat": True,
            "num_unique_system_prompts": 3,
            "num_users_per_system_prompt": 2,
            "output_len": 20,
            "question_len": 30,
            "system_prompt_len": 16,
        },
    },
    "load": {
        "stages": [{"duration": 10, "rate": 2}, {"duration": 5, "rate": 4.5}],
        "type": "constant",
    },
}


def test_aliases_stages_and_request_count() -> None:
    p = parse_profile(PROFILE)
    assert (p.data.num_groups, p.data.prompts_per_group, p.data.num_prompts) == (3, 2, 6)
    assert p.data.multi_turn and p.load is LoadKind.CONSTANT
    # int(rate x duration) per stage: 20 + int(22.5)
    assert [s.num_requests for s in p.stages] == [20, 22]
    assert p.num_requests == 42


def test_constant_load_spreads_each_stage_over_its_duration() -> None:
    reqs = profile_requests(parse_profile(PROFILE), seed=7)
    t = np.array([r.arrival_s for r in reqs])
    assert len(reqs) == 42 and np.all(np.diff(t) > 0)
    # stage 0: gaps scaled to sum to 10 s, so its last request is sent at 10 s exactly
    assert t[19] == pytest.approx(10.0)
    # stage 1 starts interval (1 s) + 1 s after stage 0's 10 s and ends 5 s later
    assert t[20] > 12.0 and t[41] == pytest.approx(17.0)


def test_cycled_prompts_recur_every_groups_x_users_requests() -> None:
    reqs = profile_requests(parse_profile(PROFILE), seed=1)
    assert [r.prompt_len for r in reqs[:3]] == [46, 46, 46]
    assert all(r.output_len == 20 for r in reqs)
    first = [tuple(r.prompt) for r in reqs[:6]]
    assert len(set(first)) == 6  # six distinct prompts ...
    assert [tuple(r.prompt) for r in reqs[6:12]] == first  # ... then the same six again
    assert [tuple(r.prompt) for r in reqs[20:26]] == first  # each stage starts the cycle over
    # requests of one group share its 16-token system prompt, and only that
    groups: dict[tuple[int, ...], int] = {}
    for r in reqs[:6]:
        head = tuple(r.prompt[:16])
        groups[head] = groups.get(head, 0) + 1
    assert sorted(groups.values()) == [2, 2, 2]


def test_unique_questions_give_every_request_its_own() -> None:
    reqs = profile_requests(parse_profile(PROFILE), seed=1, questions=Questions.UNIQUE)
    assert len({tuple(r.prompt) for r in reqs}) == 42
    assert len({tuple(r.prompt[:16]) for r in reqs}) == 3


def test_poisson_load_and_seed() -> None:
    raw = {**PROFILE, "load": {"type": "poisson", "stages": [{"rate": 100, "duration": 10}]}}
    a = profile_requests(parse_profile(raw), seed=3)
    assert len(a) == 1000
    assert a[-1].arrival_s != pytest.approx(10.0)  # no scaling: the gaps are the draws
    assert [r.arrival_s for r in a] == [
        r.arrival_s for r in profile_requests(parse_profile(raw), seed=3)
    ]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"load": {"type": "concurrent", "stages": [{"rate": 1, "duration": 1}]}}, "load.type"),
        ({"load": {"stages": [{"rate": 1}]}}, r"load.stages\[0\]"),
        ({"load": {"stages": [{"rate": -1, "duration": 5}]}}, "stage.rate"),
        ({"data": {"type": "random"}}, "data.type"),
        ({"data": {"type": "shared_prefix", "shared_prefix": {"question_len": 0}}}, "question_len"),
        ({"data": {"type": "shared_prefix", "shared_prefix": {"bogus": 1}}}, "bogus"),
        ({"load": {"stages": []}}, "load.stages"),
    ],
)
def test_bad_profiles_name_the_field(edit: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        parse_profile({**PROFILE, **edit})


def test_profile_files_json_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(PROFILE))
    assert load_profile(tmp_path / "p.json").num_requests == 42
    yaml_text = "load:\n  type: constant\n  stages:\n  - {rate: 1, duration: 3}\n"
    yaml_text += "data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: 2\n"
    (tmp_path / "p.yaml").write_text(yaml_text)
    pytest.importorskip("yaml")
    p = load_profile(tmp_path / "p.yaml")
    assert (p.num_requests, p.data.num_groups, p.data.prompts_per_group) == (3, 2, 10)
    (tmp_path / "bad.yaml").write_text("load: [\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_profile(tmp_path / "bad.yaml")
