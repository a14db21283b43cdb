"""The fallback rule for compute peaks (``specs.peaks``, ``data/peak_fallback.toml``): every
accelerator of the catalog has a peak for every format, each one written out by hand from the
catalog files. fp32 on a chip without an fp32 path is a sixth of its 16-bit peak (six bf16
products per fp32 product); an 8- or 4-bit format without its own path runs at the nearest
listed narrow path, else at the 16-bit rate."""

from __future__ import annotations

import dataclasses

import pytest

from ridgeline.errors import ConfigError
from ridgeline.specs import DType, accelerator_names, get_accelerator
from ridgeline.specs.peaks import fallback_chains

F32, B16, F16, F8, I8, I4, F4 = DType

# accelerator -> format -> (the listed format that prices it, FLOP/s)
EXPECTED: dict[str, dict[DType, tuple[DType, float]]] = {
    "a100-80gb": {
        F32: (F32, 19.5e12),
        B16: (B16, 312e12),
        F16: (F16, 312e12),
        F8: (I8, 624e12),
        I8: (I8, 624e12),
        I4: (I8, 624e12),
        F4: (I8, 624e12),
    },
    "b200": {
        F32: (F32, 80e12),
        B16: (B16, 2.25e15),
        F16: (F16, 2.25e15),
        F8: (F8, 4.5e15),
        I8: (I8, 4.5e15),
        I4: (I8, 4.5e15),
        F4: (F4, 9e15),
    },
    "cerebras-wse3": {
        F32: (B16, 15.8e15 / 6),
        B16: (B16, 15.8e15),
        F16: (F16, 15.8e15),
        F8: (B16, 15.8e15),
        I8: (B16, 15.8e15),
        I4: (B16, 15.8e15),
        F4: (B16, 15.8e15),
    },
    "groq-lpu": {
        F32: (B16, 188e12 / 6),
        B16: (B16, 188e12),
        F16: (F16, 188e12),
        F8: (I8, 750e12),
        I8: (I8, 750e12),
        I4: (I8, 750e12),
        F4: (I8, 750e12),
    },
    "h100-sxm": {
        F32: (F32, 66.9e12),
        B16: (B16, 989.4e12),
        F16: (F16, 989.4e12),
        F8: (F8, 1978.9e12),
        I8: (I8, 1978.9e12),
        I4: (I8, 1978.9e12),
        F4: (F8, 1978.9e12),
    },
    "h200": {
        F32: (F32, 67e12),
        B16: (B16, 989e12),
        F16: (F16, 989e12),
        F8: (F8, 1979e12),
        I8: (I8, 1979e12),
        I4: (I8, 1979e12),
        F4: (F8, 1979e12),
    },
    "ibm-spyre": {
        F32: (F16, 98.3e12 / 6),
        B16: (F16, 98.3e12),
        F16: (F16, 98.3e12),
        F8: (F8, 196.6e12),
        I8: (I8, 196.6e12),
        I4: (I4, 393.2e12),
        F4: (F8, 196.6e12),
    },
    "mi300x": {
        F32: (F32, 163.4e12),
        B16: (B16, 1307.4e12),
        F16: (F16, 1307.4e12),
        F8: (F8, 2614.9e12),
        I8: (I8, 2614.9e12),
        I4: (I8, 2614.9e12),
        F4: (F8, 2614.9e12),
    },
    "tpu-v5e": {
        F32: (B16, 197e12 / 6),
        B16: (B16, 197e12),
        F16: (B16, 197e12),
        F8: (I8, 393e12),
        I8: (I8, 393e12),
        I4: (I8, 393e12),
        F4: (I8, 393e12),
    },
    "tpu-v5p": {
        F32: (B16, 459e12 / 6),
        B16: (B16, 459e12),
        F16: (B16, 459e12),
        F8: (F8, 459e12),
        I8: (I8, 918e12),
        I4: (I8, 918e12),
        F4: (F8, 459e12),
    },
    "tpu-v6e": {
        F32: (B16, 918e12 / 6),
        B16: (B16, 918e12),
        F16: (B16, 918e12),
        F8: (F8, 918e12),
        I8: (I8, 1836e12),
        I4: (I8, 1836e12),
        F4: (F8, 918e12),
    },
    "tpu7x": {
        F32: (B16, 2307e12 / 6),
        B16: (B16, 2307e12),
        F16: (B16, 2307e12),
        F8: (F8, 4614e12),
        I8: (F8, 4614e12),
        I4: (F8, 4614e12),
        F4: (F8, 4614e12),
    },
    "l40s": {
        F32: (F32, 91.6e12),
        B16: (B16, 362.05e12),
        F16: (F16, 362.05e12),
        F8: (F8, 733e12),
        I8: (I8, 733e12),
        I4: (I8, 733e12),
        F4: (F8, 733e12),
    },
    "xeon-spr": {
        F32: (F32, 7.2e12),
        B16: (B16, 115e12),
        F16: (B16, 115e12),
        F8: (I8, 230e12),
        I8: (I8, 230e12),
        I4: (I8, 230e12),
        F4: (I8, 230e12),
    },
}


def test_the_table_covers_the_catalog_and_every_format() -> None:
    assert sorted(EXPECTED) == accelerator_names()
    assert all(set(row) == set(DType) for row in EXPECTED.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("dtype", list(DType))
def test_every_accelerator_has_a_peak_for_every_format(name: str, dtype: DType) -> None:
    rule = get_accelerator(name).peak_rule(dtype)
    stand, flops = EXPECTED[name][dtype]
    assert rule.stand.dtype == stand
    assert rule.flops_per_s == pytest.approx(flops, rel=1e-12)
    assert rule.listed == (stand == dtype)
    assert get_accelerator(name).peak(dtype) == rule.flops_per_s


def test_every_chain_starts_on_its_own_format_ends_on_16_bits_and_cites_a_source() -> None:
    chains = fallback_chains()
    assert set(chains) == set(DType)
    for dtype, chain in chains.items():
        assert chain[0].dtype == dtype and chain[0].passes == 1
        assert chain[-1].dtype in (B16, F16)
        assert all(s.source for s in chain)
    assert [(s.dtype, s.passes) for s in chains[F32]] == [(F32, 1), (B16, 6), (F16, 6)]


def test_a_chip_with_no_16_bit_peak_names_the_format() -> None:
    bare = dataclasses.replace(get_accelerator("h100-sxm"), peak_flops_per_s={F32: 1e12})
    assert bare.peak(F32) == 1e12
    with pytest.raises(ConfigError, match="h100-sxm: no peak_flops_per_s for bf16 or a fallback"):
        bare.peak(B16)
