"""The CPU's physical peak through the microarchitecture table, with hand-computed values."""

from __future__ import annotations

import pytest

from ridgeline.lab.compute_peak import (
    CoreProbe,
    KernelRate,
    PeakReport,
    microarchitectures,
    parse_cpu_info,
    physical_peak,
)


def _cpuinfo(vendor: str, family: int, model: int, flags: str, name: str, mhz: str) -> str:
    return (
        f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        f"model name\t: {name}\ncpu MHz\t\t: {mhz}\nflags\t\t: {flags}\n\n"
        "processor\t: 1\nvendor_id\t: SomeoneElse\n"
    )


ZEN1 = _cpuinfo("AuthenticAMD", 23, 1, "fpu sse2 avx fma avx2 hypervisor", "AMD EPYC", "2000.000")
SPR = _cpuinfo(
    "GenuineIntel", 6, 143, "sse2 avx fma avx2 avx512f", "Intel(R) Xeon(R) Platinum 8480+", "800.0"
)


def test_zen1_at_2_ghz_is_32_gflops_per_core() -> None:
    peak = physical_peak(parse_cpu_info(ZEN1))
    # 2 FMA pipes x 4 fp32 lanes (128-bit pipes) x 2 FLOP x 2.0e9 Hz
    assert peak.microarch == "AMD Zen / Zen+"
    assert (peak.fma_pipes, peak.fp32_lanes, peak.flops_per_cycle) == (2, 4, 16)
    assert peak.flops_per_s == pytest.approx(2 * 4 * 2 * 2.0e9)
    # the clock is /proc/cpuinfo's and the family/model come from a hypervisor: both guesses
    assert peak.is_estimate and len(peak.estimates) == 2
    assert peak.at_clock(2.5e9) == pytest.approx(2 * 4 * 2 * 2.5e9)
    # no bf16 instructions: `lab calibrate` measures fp32 only (bf16 would be scalar code)
    assert not parse_cpu_info(ZEN1).has_bf16_path
    assert parse_cpu_info(SPR.replace("avx512f", "avx512f amx_bf16")).has_bf16_path


def test_sapphire_rapids_with_avx512_at_2_ghz_is_128_gflops_per_core() -> None:
    info = parse_cpu_info(SPR, max_freq_khz="2000000\n")
    peak = physical_peak(info)
    # 2 FMA units x 16 fp32 lanes x 2 FLOP x 2.0e9 Hz; the sysfs clock is no guess
    assert peak.flops_per_s == pytest.approx(2 * 16 * 2 * 2.0e9)
    assert info.clock_source == "sysfs cpuinfo_max_freq" and not peak.is_estimate


def test_avx512_masked_by_a_hypervisor_halves_the_lanes() -> None:
    info = parse_cpu_info(SPR.replace(" avx512f", ""), max_freq_khz="2000000")
    # the same pipes, but only 256-bit FMAs can be issued: 2 x 8 x 2 x 2.0e9
    assert physical_peak(info).flops_per_s == pytest.approx(64e9)


def test_base_clock_from_the_model_name_is_an_estimate() -> None:
    text = _cpuinfo(
        "GenuineIntel",
        6,
        0x55,
        "fma avx2 avx512f",
        "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz",
        "1000",
    )
    peak = physical_peak(parse_cpu_info(text))
    # Skylake-SP: 2 x 16 x 2 x 2.4e9; both the unit count and the base clock are guesses
    assert peak.flops_per_s == pytest.approx(153.6e9)
    assert any("Silver" in e for e in peak.estimates)
    assert any("model name" in e for e in peak.estimates)


@pytest.mark.parametrize(
    ("vendor", "family", "model", "flags"),
    [
        ("HygonGenuine", 24, 0, "fma avx2"),  # not in the table
        ("GenuineIntel", 6, 0x4F, "avx sse2"),  # Broadwell without the FMA flag
        ("AuthenticAMD", 23, 1, "fma avx2"),  # but no model number at all below
    ],
)
def test_unknown_peak_is_none_not_a_guess(vendor: str, family: int, model: int, flags: str) -> None:
    text = _cpuinfo(vendor, family, model, flags, "x", "3000")
    if vendor == "AuthenticAMD":
        text = text.replace("model\t\t: 1\n", "")
    peak = physical_peak(parse_cpu_info(text))
    assert peak.flops_per_s is None and peak.flops_per_cycle is None
    assert peak.estimates[0].startswith("peak unknown")


def test_table_entries_have_sources_and_never_overlap() -> None:
    table = microarchitectures()
    assert all(m.source and m.fma_pipes >= 1 and m.pipe_bits in (128, 256, 512) for m in table)
    for m in table:
        for other in table:
            if m is other or (m.vendor, m.family) != (other.vendor, other.family):
                continue
            for lo, hi in m.models:
                assert all(hi < olo or lo > ohi for olo, ohi in other.models), (m.name, other.name)


def test_report_checks_the_table_against_the_fma_loop() -> None:
    peak = physical_peak(parse_cpu_info(ZEN1))
    core = CoreProbe(threads=1, fma_flops_per_s=39.2e9, clock_hz=2.45e9, lanes=8)
    report = PeakReport(
        1,
        peak,
        core.clock_hz,
        core.flops_per_cycle_per_core,
        (KernelRate("torch.mm", 32e9), KernelRate("FMA loop", 39.2e9)),
    )
    # 39.2e9 / 2.45e9 = 16.0 FLOP/cycle, the table's 16; the loop beats 16 x 2.0 GHz = 32e9
    assert report.calibrated == KernelRate("FMA loop", 39.2e9)
    assert report.physical_flops_per_s == pytest.approx(32e9)
    assert report.physical_at_measured_clock == pytest.approx(16 * 2.45e9)
    notes = report.notes()
    assert "confirms the table's 16" in notes[0] and "above the peak" in notes[1]
    doubled = PeakReport(1, peak, 2.45e9, 32.0, report.kernels)
    assert "contradicts" in doubled.notes()[0]
