"""Catalog files, config.json parsing and parameter counts against published numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.specs import (
    Attention,
    DType,
    ManagedBy,
    accelerator_names,
    get_accelerator,
    get_model,
    load_accelerator_file,
    model_names,
    param_counts,
    parse_config,
)

CATALOG = [
    "a100-80gb",
    "h100-sxm",
    "h200",
    "b200",
    "mi300x",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
    "tpu7x",
    "cerebras-wse3",
    "groq-lpu",
    "ibm-spyre",
    "xeon-spr",
    "l40s",
]


def test_catalog_has_every_accelerator_of_the_issue() -> None:
    assert sorted(CATALOG) == accelerator_names()


@pytest.mark.parametrize("name", CATALOG)
def test_every_number_has_a_source(name: str) -> None:
    acc = get_accelerator(name)
    assert "cores" in acc.sources
    assert {f"peak_flops_per_s.{d.value}" for d in acc.peak_flops_per_s} <= set(acc.sources)
    for lvl in acc.levels:
        assert lvl.sources["capacity_bytes"]
        if lvl.bandwidth_bytes_per_s is not None:
            assert lvl.sources["bandwidth_bytes_per_s"]
    cited = {
        tag
        for src in [*acc.sources.values(), *(s for lvl in acc.levels for s in lvl.sources.values())]
        for tag in _tags(src)
    }
    assert cited <= set(acc.references), f"{name}: cited tags without a reference entry"


def _tags(source: str) -> list[str]:
    import re

    return re.findall(r"\[(S\d+[a-z-]*)\]", source)


def test_h100_levels_fastest_first_with_managers() -> None:
    h100 = get_accelerator("h100-sxm")
    assert h100.level_names == ["registers", "smem", "l2", "hbm", "host"]
    assert [lvl.managed_by for lvl in h100.levels] == [
        ManagedBy.COMPILER,
        ManagedBy.KERNEL,
        ManagedBy.HARDWARE,
        ManagedBy.RUNTIME,
        ManagedBy.RUNTIME,
    ]
    assert h100.device.bandwidth_bytes_per_s == 3.35e12
    assert h100.peak(DType.BF16) == 989.4e12


def test_ridge_point_h100_bf16_hbm() -> None:
    # 989.4e12 / 3.35e12 = 295.34 FLOP/byte (reference/hardware.md §9)
    assert get_accelerator("h100-sxm").ridge_point() == pytest.approx(295.343, rel=1e-4)


def test_spyre_usable_capacity_and_compiler_managed_scratchpad() -> None:
    spyre = get_accelerator("ibm-spyre")
    lx = spyre.level("lx")
    assert lx.managed_by is ManagedBy.COMPILER and lx.instances == 32
    assert lx.usable_bytes == pytest.approx(1.55 * 2**20, rel=1e-3)
    assert spyre.device_capacity_bytes == 112e9


def test_peak_falls_back_to_16_bit_when_a_format_is_missing() -> None:
    tpu = get_accelerator("tpu-v5e")
    assert tpu.peak(DType.FP8) == tpu.peak(DType.INT8) == 393e12
    assert get_accelerator("groq-lpu").peak(DType.INT4) == 750e12


def test_unknown_accelerator_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError, match="did you mean h100-sxm"):
        get_accelerator("h100-sxn")


GOOD_TOML = (Path(__file__).parent.parent / "data" / "mychip.toml").read_text()


def test_user_accelerator_file(tmp_path: Path) -> None:
    path = tmp_path / "mychip.toml"
    path.write_text(GOOD_TOML)
    acc = get_accelerator(str(path))
    assert acc.name == "mychip" and acc.ridge_point() == 200.0


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("value = 8e9", "value = -8e9"), "levels.0.capacity_bytes.value"),
        (('managed_by = "runtime"', 'managed_by = "magic"'), "levels.0.managed_by"),
        (('device_level = "dram"', 'device_level = "hbm"'), "device_level"),
        (("bf16 = ", "bf17 = "), "peak_flops_per_s"),
        (('source = "datasheet" }\n[peak', 'source = "" }\n[peak'), "cores.source"),
    ],
)
def test_bad_accelerator_file_names_the_field(
    tmp_path: Path, edit: tuple[str, str], field: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(GOOD_TOML.replace(*edit, 1))
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_accelerator_file(path)


# Published parameter counts (model cards / safetensors index totals).
PUBLISHED = {
    "gpt2": 124_439_808,
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-7b": 7_615_616_512,
    "llama-3.1-70b": 70_553_706_496,
    "deepseek-v3": 671_026_419_200,  # without the MTP module (685B with it)
}


@pytest.mark.parametrize(("name", "count"), PUBLISHED.items())
def test_parameter_counts_equal_published(name: str, count: int) -> None:
    assert param_counts(get_model(name)).total == count


def test_moe_active_parameters() -> None:
    assert param_counts(get_model("mixtral-8x7b")).active == 12_879_925_248  # "12.9B active"
    assert param_counts(get_model("deepseek-v3")).active == 37_552_297_472  # "37B activated"


# Model cards' rounded totals (billions): the count must round to them.
ROUNDED_B = {
    "qwen3-14b": 14.8,
    "codellama-34b": 33.7,
    "mixtral-8x22b": 140.6,
    "mistral-nemo-12b": 12.2,
    "yi-34b": 34.4,
}


@pytest.mark.parametrize(("name", "billions"), ROUNDED_B.items())
def test_parameter_counts_round_to_the_model_cards(name: str, billions: float) -> None:
    assert round(param_counts(get_model(name)).total / 1e9, 1) == billions


def test_llama4_scout_nested_moe_config_by_hand() -> None:
    # text_config of a llama4 wrapper; 48 layers, all MoE (interleave step 1), 16 experts
    # of 8,192 plus a shared expert of 8,192; dense width 16,384 unused (no dense layer)
    m = get_model("llama-4-scout")
    c = param_counts(m)
    assert (m.family, m.num_layers, m.ffn, sum(layer.moe for layer in m.layers)) == (
        "llama4_text",
        48,
        16384,
        48,
    )
    assert c.attention == 48 * (5120 * (40 + 8 + 8) * 128 + 40 * 128 * 5120)
    assert c.routed_experts == 48 * 16 * 3 * 5120 * 8192
    assert c.shared_experts == 48 * 3 * 5120 * 8192
    assert c.routers == 48 * 5120 * 16
    assert round(c.active / 1e9) == 17  # "17B active parameters"


def test_llama4_interleaved_moe_layers_use_the_dense_width() -> None:
    text = {
        **_cfg(model_type="llama4_text", intermediate_size=64, intermediate_size_mlp=256),
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
    }
    m = parse_config({"model_type": "llama4", "text_config": text}, "maverick-like")
    assert [layer.moe for layer in m.layers] == [False, True, False, True]
    assert m.ffn == 256
    assert m.moe is not None and (m.moe.expert_ffn, m.moe.shared_ffn) == (64, 64)


def test_l40s_datasheet_numbers() -> None:
    acc = get_accelerator("l40s")
    assert acc.device_capacity_bytes == 48e9
    assert acc.device_bandwidth_bytes_per_s == 864e9
    assert acc.peak(DType.BF16) == 362.05e12
    assert acc.peak(DType.FP8) == 733e12
    assert acc.interconnect is not None and acc.interconnect.kind == "pcie4"
    assert acc.calibration.family == "nvidia-gpu"


def test_distilgpt2_hand_count() -> None:
    # wte 50257·768 + wpe 1024·768 + 6 layers × 7,087,872 + ln_f 1536 (tied lm_head)
    assert (
        param_counts(get_model("distilgpt2")).total == 38_597_376 + 786_432 + 6 * 7_087_872 + 1536
    )


def test_shipped_models() -> None:
    assert set(model_names()) >= {
        "distilgpt2",
        "gpt2",
        "llama-2-7b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "mistral-7b",
        "mixtral-8x7b",
        "qwen2.5-7b",
        "deepseek-v3",
        "qwen3-14b",
        "codellama-34b",
        "llama-2-70b",
        "mixtral-8x22b",
        "llama-4-scout",
        "mistral-nemo-12b",
        "yi-34b",
    }


def _cfg(**kw: object) -> dict:
    base = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    base.update(kw)
    return base


def test_qwen2_use_sliding_window_false_means_no_window() -> None:
    m = get_model("qwen2.5-7b")
    assert all(layer.window is None for layer in m.layers)
    on = parse_config(
        {**json.loads((Path(__file__).parent.parent / "data" / "qwen2_window.json").read_text())},
        "q",
    )
    assert [layer.window for layer in on.layers] == [None, None, 64, 64]


def test_mistral_window_and_gemma2_alternation() -> None:
    assert {layer.window for layer in get_model("mistral-7b").layers} == {4096}
    g2 = parse_config(_cfg(model_type="gemma2", sliding_window=4096, head_dim=64), "g2")
    assert [layer.window for layer in g2.layers] == [4096, None, 4096, None]
    assert g2.tied_embeddings and g2.norms_per_layer == 4


def test_layer_types_list_wins() -> None:
    m = parse_config(
        _cfg(
            sliding_window=128,
            layer_types=[
                "full_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
        ),
        "x",
    )
    assert [layer.window for layer in m.layers] == [None, 128, 128, None]


def test_mla_kv_heads_in_config_are_not_what_is_cached() -> None:
    m = get_model("deepseek-v3")
    assert m.num_kv_heads == 128 and m.attention is Attention.MLA
    assert m.kv_heads_cached == 1 and m.kv_elements_per_token_per_layer == 512 + 64


def test_attention_kinds() -> None:
    assert parse_config(_cfg(num_key_value_heads=8), "a").attention is Attention.MHA
    assert parse_config(_cfg(num_key_value_heads=1), "a").attention is Attention.MQA
    assert parse_config(_cfg(), "a").attention is Attention.GQA


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"hidden_size": 1}, "model_type"),
        (_cfg(model_type="mamba"), "model_type"),
        ({k: v for k, v in _cfg().items() if k != "num_hidden_layers"}, "num_hidden_layers"),
        (_cfg(hidden_size="big"), "hidden_size"),
        (_cfg(num_key_value_heads=3), "num_key_value_heads"),
        (_cfg(sliding_window=None, layer_types=["sliding_attention"] * 4), "sliding_window"),
    ],
)
def test_bad_config_names_the_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        parse_config(data, "bad")


def test_text_config_is_read_from_a_vlm_wrapper() -> None:
    m = parse_config({"model_type": "llava", "text_config": _cfg()}, "vlm")
    assert m.num_layers == 4


def test_config_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        get_model(str(bad))
    with pytest.raises(UnknownNameError, match="llama-3.1-8b"):
        get_model("llama-3.1-8")


def test_transformers5_rope_parameters_are_read() -> None:
    """transformers >= 5 saves ``rope_parameters``; theta and llama3 scaling must survive."""
    base = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 96,
        "vocab_size": 128,
    }
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0}
    m = parse_config({**base, "rope_parameters": {"rope_theta": 500000.0, **scaling}}, "x")
    assert m.rope_theta == 500000.0
    assert m.rope_scaling == scaling
    plain = parse_config(
        {**base, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}, "y"
    )
    assert plain.rope_theta == 1e4 and plain.rope_scaling is None


def test_accelerator_and_model_names_are_case_insensitive() -> None:
    # regression: the docs' 'predict --hw H100-SXM' failed with "unknown accelerator"
    assert get_accelerator("H100-SXM") == get_accelerator("h100-sxm")
    assert get_accelerator("TPU-v5e").name == "tpu-v5e"
    assert get_model("Llama-3.1-8B") == get_model("llama-3.1-8b")
    with pytest.raises(UnknownNameError, match="did you mean h100-sxm"):
        get_accelerator("H100-SXN")


def test_measured_before_calibrating_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # regression: '--hw measured' before 'lab calibrate' was "unknown accelerator", with no
    # word of where the lab writes it
    monkeypatch.setenv("RIDGELINE_HW_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as e:
        get_accelerator("measured")
    assert str(e.value) == (
        f"accelerator 'measured': no {tmp_path}/measured.toml yet; 'ridgeline lab calibrate' "
        "measures this machine and writes it there"
    )
