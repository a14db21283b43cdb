"""Packed linear layers against ``F.linear``: oneDNN's layouts and the column-panel kernel."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from ridgeline.engine.packing import (  # noqa: E402
    Layout,
    PackedLinear,
    PanelLinear,
    can_pack,
    pack_linears,
    resolve,
)
from ridgeline.engine.panel_gemm import load_panel_gemm  # noqa: E402
from ridgeline.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.torch
ROWS = (1, 2, 3, 4, 5, 8, 9, 16, 17, 40)  # every kernel variant, chunks of 16 and remainders


@pytest.fixture(scope="module")
def panel() -> Any:
    k = load_panel_gemm()
    if k is None:
        pytest.skip("no AVX-512 C++ build: the engine uses oneDNN's layouts")
    return k


def _linear(n_in: int, n_out: int, bias: bool) -> torch.nn.Linear:
    torch.manual_seed(n_in * 7 + n_out)
    return torch.nn.Linear(n_in, n_out, bias=bias)


@pytest.mark.parametrize(
    ("n_in", "n_out", "bias"),
    [(64, 48, False), (100, 37, True), (256, 1, True), (40, 3257, True), (24, 2051, False)],
)
@pytest.mark.parametrize("rows", ROWS)
def test_panel_linear_matches_f_linear(
    panel: Any, n_in: int, n_out: int, bias: bool, rows: int
) -> None:
    # out not a multiple of 16 (masked last panel), in not a multiple of 16, one column; 204
    # panels (runs of 64, then a shorter tail run) and 129 (one panel left over for one stream)
    lin = _linear(n_in, n_out, bias)
    x = torch.randn(rows, n_in)
    with torch.inference_mode():
        ref = torch.nn.functional.linear(x, lin.weight, lin.bias)
        got = PanelLinear(lin, panel)(x)
    assert got.shape == ref.shape
    assert (got - ref).abs().max().item() < 1e-4 * max(1.0, ref.abs().max().item())


@pytest.mark.parametrize("layout", [Layout.ONEDNN, Layout.DUAL])
def test_onednn_layouts_match_f_linear(layout: Layout) -> None:
    if not can_pack(torch.device("cpu")):
        pytest.skip("no oneDNN in this torch build")
    lin = _linear(96, 80, True)
    with torch.inference_mode():
        packed = PackedLinear(lin, layout)
        for rows in (1, 7):
            x = torch.randn(rows, 96)
            ref = torch.nn.functional.linear(x, lin.weight, lin.bias)
            assert (packed(x) - ref).abs().max().item() < 1e-4


def test_auto_takes_panels_only_where_they_apply(panel: Any) -> None:
    assert resolve(Layout.AUTO, torch.float32, panel) is Layout.PANEL
    assert resolve(Layout.AUTO, torch.bfloat16, panel) is Layout.DUAL
    assert resolve(Layout.AUTO, torch.float32, None) is Layout.DUAL
    with pytest.raises(ConfigError, match="pack_weights"):
        resolve(Layout.PANEL, torch.bfloat16, panel)
    with pytest.raises(ConfigError, match="pack_weights"):
        Layout.parse("fastest")


def test_pack_linears_replaces_every_linear(panel: Any) -> None:
    net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Sequential(torch.nn.Linear(32, 8)))
    assert pack_linears(net, Layout.PANEL, panel) == 2
    assert isinstance(net[0], PanelLinear) and isinstance(net[1][0], PanelLinear)


def test_panel_linear_shows_in_the_profiler_as_a_gemm(panel: Any) -> None:
    # the lab's gap decomposition needs the C++ GEMM under a name it groups with the GEMMs
    from torch.profiler import ProfilerActivity, profile

    from ridgeline.lab.profile import category

    lin = PanelLinear(_linear(64, 40, False), panel)
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        lin(torch.randn(3, 64))
    names = {e.key for e in prof.key_averages()}
    assert "ridgeline::panel_linear[3x40]" in names
    assert category("ridgeline::panel_linear[3x40]", None, 50257) == "linear GEMMs"
    assert category("ridgeline::panel_linear[1x50257]", None, 50257) == "lm_head"
    assert category("ridgeline::paged_attention", None, 50257) == "attention"


def test_bandwidth_probe_and_roofline(panel: Any) -> None:
    from ridgeline.engine import bench
    from ridgeline.specs import get_model

    rates = bench.read_rates_bytes_per_s(1 << 20, panel)  # 4 MiB: sum and a panel GEMV
    expected = ["gemv/4k", "gemv/huge", "sum/4k", "sum/huge"]
    assert sorted(rates) == expected and all(len(r) == 5 for r in rates.values())
    probe = bench.ReadProbe(1 << 20, panel)  # buffers kept: probe again without reallocating
    again = [probe.rates() for _ in range(2)]
    assert all(sorted(r) == expected and min(map(min, r.values())) > 1e8 for r in again)
    bw = bench.read_bandwidth_bytes_per_s(1 << 20, panel)
    assert 1e8 < bench.sustained_read_bytes_per_s(1 << 20, panel) < 1e13 and 1e8 < bw < 1e13
    assert bench.fastest({"a": [1.0, 5.0, 2.0], "b": [3.0, 3.0, 4.0]}, max) == 5.0
    assert bench.fastest({"a": [1.0, 5.0, 2.0], "b": [3.0, 3.0, 4.0]}, statistics.median) == 3.0
    spec = get_model("distilgpt2")
    # one row: every operator is bandwidth-bound at 20 GB/s and 100 GFLOP/s
    assert bench.roofline_ms(spec, 1, 128, 20e9, 100e9) == pytest.approx(
        bench.bytes_ms(spec, 1, 128, 20e9)
    )
    # 16 rows: the weight GEMMs do 8 FLOP/B, above that ridge (5), so FLOPs bound them at
    # 8/5 = 1.6x their bytes time; weights are ~3/4 of the bytes at T=128, the rest stays
    # bandwidth-bound: ~1.45x in all
    roof = bench.roofline_ms(spec, 16, 128, 20e9, 100e9)
    assert 1.3 < roof / bench.bytes_ms(spec, 16, 128, 20e9) < 1.6
