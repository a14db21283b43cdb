"""The CLI: JSON schemas, tables, plots, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def run_json(*args: str) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_hw_list_and_show() -> None:
    names = [a["name"] for a in run_json("hw", "list")["accelerators"]]
    assert "ibm-spyre" in names and "l40s" in names and len(names) == 14
    spyre = run_json("hw", "show", "ibm-spyre")
    assert [lvl["managed_by"] for lvl in spyre["levels"]] == ["compiler", "runtime", "runtime"]
    host = spyre["levels"][2]  # PCIe Gen5 x16: 32 GT/s × 16 lanes × 128/130 ÷ 8 = 63 GB/s
    assert (host["name"], host["bandwidth_bytes_per_s"]) == ("host", 6.3e10)
    code, out, _ = run("hw", "show", "h100-sxm")
    assert code == 0 and "smem" in out and "kernel" in out


def test_hw_list_and_show_say_usable_of_installed_alike() -> None:
    """Spyre's LPDDR5: 128 GB installed, 112 GB usable (16 GB for ECC), in both commands and
    their JSON; every accelerator's list row agrees with its device level in ``hw show``."""
    for row in run_json("hw", "list")["accelerators"]:
        shown = run_json("hw", "show", row["name"])
        level = next(lvl for lvl in shown["levels"] if lvl["name"] == row["device_level"])
        assert row["device_installed_bytes"] == level["total_capacity_bytes"]
        assert row["device_capacity_bytes"] == (
            level["usable_bytes"] or level["total_capacity_bytes"]
        )
    code, listed, _ = run("hw", "list")
    assert code == 0 and "usable of installed" in listed
    assert "112 GB of 128 GB lpddr5" in listed
    code, shown_text, _ = run("hw", "show", "ibm-spyre")
    assert code == 0 and "112 GB of 128 GB" in shown_text
    # the three kinds of local memory of course module 3, named
    assert (
        "compiler-managed local memory" in shown_text
        and "three kinds of local memory" in shown_text
    )


def test_model_show_json() -> None:
    d = run_json("model", "show", "llama-3.1-8b")
    assert d["params"] == 8_030_261_248 == d["active_params"]
    assert (d["layers"], d["attention"], d["kv_bytes_per_token"]) == (32, "gqa", 131_072)
    assert (
        run_json("model", "show", "llama-3.1-8b", "--kv-dtype", "fp8")["kv_bytes_per_token"]
        == 65_536
    )
    mix = run_json("model", "show", "mixtral-8x7b")
    assert mix["active_params"] == 12_879_925_248
    assert run_json("model", "show", "deepseek-v3")["attention"] == "mla"


def test_model_show_from_a_config_path(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 1,
                "vocab_size": 100,
            }
        )
    )
    d = run_json("model", "show", str(cfg))
    assert d["attention"] == "mqa" and d["kv_bytes_per_token"] == 2 * 2 * 1 * 16 * 2


@pytest.mark.slow
def test_roofline_json_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "r.png"
    d = run_json(
        "roofline",
        "--hw",
        "a100-80gb",
        "--model",
        "llama-2-7b",
        "--phase",
        "decode",
        "--batch",
        "1",
        "--context",
        "640",
        "--plot",
        str(plot),
        "--ideal",  # the datasheet's roofline: 13.5 GB of weights at 2.039 TB/s
    )
    assert d["ridge_point_flops_per_byte"] == pytest.approx(312e12 / 2.039e12)
    assert d["bound"] == "memory" and d["mode"] == "ideal"
    assert d["step_time_s"] == pytest.approx(6.65e-3, rel=1e-3)
    assert {"flops", "bytes", "arithmetic_intensity", "ops"} <= set(d)
    assert plot.stat().st_size > 10_000


def test_kv_json_with_hw() -> None:
    d = run_json(
        "kv", "--model", "llama-3.1-8b", "--batch", "1", "--context", "32768", "--hw", "h100-sxm"
    )
    assert d["kv_bytes_per_token"] == 131_072
    assert d["kv_bytes"] == 32_768 * 131_072
    assert d["weights_bytes"] == 8_030_261_248 * 2
    assert d["crossover_context_tokens"] == 122_533
    # the KV-pool rule: 0.9 x 80e9 B less the weights and a 2,559,756,800 B reserve (the
    # activations of a step of 8,192 tokens over 256 sequences, and a 1e9 B workspace)
    assert d["max_batch"] == int((72e9 - 16_060_522_496 - 2_559_756_800) // (32_768 * 131_072))
    assert (
        d["max_batch"] == 12 and d["capacity"]["memory_per_chip"]["reserve_bytes"] == 2_559_756_800
    )
    assert d["max_context"] == 131_072 and d["capacity"]["context_capped"]  # the model's maximum


def test_questions_and_compare_tables() -> None:
    code, out, _ = run("questions", "--hw", "ibm-spyre", "--model", "llama-3.1-8b")
    assert code == 0 and "compiler" in out and "scarce" in out
    d = run_json("compare", "--model", "llama-3.1-8b")
    assert [r["accelerator"] for r in d["rows"]] == [
        "h100-sxm",
        "tpu-v5e",
        "cerebras-wse3",
        "groq-lpu",
        "ibm-spyre",
    ]


@pytest.mark.slow
def test_report_writes_three_files(tmp_path: Path) -> None:
    d = run_json("report", "--model", "gpt2", "--out", str(tmp_path))
    html = Path(d["html"]).read_text()
    assert "data:image/png;base64," in html and "<script" not in html
    assert json.loads(Path(d["json"]).read_text())["schema"] == "ridgeline.report/2"
    assert "## KV cache" in Path(d["markdown"]).read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("hw", "show", "h100-sxn"), "did you mean h100-sxm"),
        (("model", "show", "lama-3.1-8b"), "unknown model"),
        (("roofline", "--batch", "0"), "field batch"),
        (("roofline", "--context", "1000000000"), "absurdly large"),
        (("kv", "--model", "llama-3.1-70b", "--hw", "h100-sxm", "--tp", "1"), "short by"),
        (("roofline", "--kv-dtype", "fp7"), "unknown dtype"),
        (("model", "show", "/nonexistent/config.json"), "no such file"),
        (("roofline", "--phase", "foo"), "'foo' is not one of"),
        (("roofline", "--batch", "x"), "Invalid value for '--batch'"),
        (("roofline", "--nope"), "No such option"),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_exit_2(args: tuple[str, ...], needle: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_malformed_config_names_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = run("model", "show", str(cfg))
    assert code == 2
    assert "field 'num_attention_heads' is missing" in err


def test_kv_with_zero_context_is_a_user_error() -> None:
    code, _, err = run("kv", "--context", "0")
    assert code == 2 and "field context" in err


def test_fp32_activations_on_a_chip_without_an_fp32_peak() -> None:
    # regression: exited 2 with "tpu-v5e: no peak_flops_per_s for fp32 or a fallback"
    d = run_json("roofline", "--hw", "tpu-v5e", "--act-dtype", "fp32", "--batch", "1")
    assert d["peak_flops_per_s"] == pytest.approx(197e12 / 6)
    assert d["ridge_point_flops_per_byte"] == pytest.approx(197e12 / 6 / 819e9)
    code, out, _ = run("hw", "show", "tpu-v5e")
    assert code == 0 and "fp32 = bf16 ÷ 6" in out
