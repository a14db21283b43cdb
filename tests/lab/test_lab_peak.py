"""KV growth seen through the resident peak (``lab.peak``), against the formula. Runs in a child
process: the 64 KiB mmap threshold it needs changes a process's allocator for good."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

CHILD = """
import json, sys, torch
from ridgeline.lab import memstat
from ridgeline.lab.configs import with_positions
from ridgeline.lab.hf import build_model
from ridgeline.lab.kvlab import LLAMA_BASE, MMAP_THRESHOLD_BYTES, llama_variant
from ridgeline.lab.peak import peak_growth
assert memstat.set_mallopt(memstat.M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
torch.set_num_threads(1)
small = dict(LLAMA_BASE, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
             head_dim=64, intermediate_size=512, vocab_size=1000)
out = {}
for kv_heads in (8, 4):
    lm = build_model(with_positions(llama_variant(kv_heads, small), 520), "small")
    out[kv_heads] = peak_growth(lm, 8, 512, 32).to_dict()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_peak_grows_by_the_formula_with_the_known_transients() -> None:
    """4 layers, 8 query heads of 64, 8 sequences (fp32): KV per token position =
    2 × 4 × 8 × kv_heads × 64 × 4 B; MHA (8 KV heads) 131,072 B, GQA (4) 65,536 B."""
    if not sys.platform.startswith("linux"):
        pytest.skip("VmHWM and mallopt are Linux/glibc")
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    mha, gqa = got["8"], got["4"]
    assert mha["formula_bytes_per_token"] == 2 * 4 * 8 * 8 * 64 * 4 == 131_072
    assert gqa["formula_bytes_per_token"] == 65_536
    # MHA: only torch.cat's old copy of one layer's K: 1 + 1/(2·4) = 1.125
    assert mha["expected_ratio"] == 1.125
    assert mha["ratio"] == pytest.approx(1.125, rel=0.08)
    # GQA: repeat_kv copies a layer's K and V twice (8 heads / 4 KV heads): 1 + 2/4 = 1.5
    assert gqa["expected_ratio"] == 1.5
    assert gqa["ratio"] == pytest.approx(1.5, rel=0.08)
    assert gqa["peak_bytes"][-1] > 512 * 65_536  # the peak holds at least the cache


def test_layout_bench_pairs_each_read_with_the_model() -> None:
    from ridgeline.lab.layout_bench import run_layout_bench

    rep = run_layout_bench(8 * 2**20, strides=(1, 4, 32), offsets=(0, 32), passes=1, line_bytes=64)
    model = {(p.kind, p.value): p.model_ratio for p in rep.points}
    # 64-B lines: stride s moves min(s, 16) times the bytes it uses; a 64-B row 32 B off a
    # line boundary touches 2 lines instead of 1
    assert model == {
        ("stride", 1): 1.0,
        ("stride", 4): 4.0,
        ("stride", 32): 16.0,
        ("offset", 0): 1.0,
        ("offset", 32): 2.0,
    }
    assert all(p.median_s > 0 and p.measured_ratio > 0 for p in rep.points)
    assert rep.to_dict()["schema"] == "ridgeline.lab-layout/1"
