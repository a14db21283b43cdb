"""A calibration taken on a busy machine is flagged, never written silently: the load average,
a repeated DRAM read and the scaling from one thread to all (``lab.steadiness``), carried into
the spec files ``lab calibrate`` writes (torch-free: the measurements are given)."""

from __future__ import annotations

import tomllib

import pytest

from ridgeline.lab.machine import (
    BandwidthPoint,
    Calibration,
    CalibrationSpec,
    MatmulPoint,
    accelerator_toml,
)
from ridgeline.lab.steadiness import MAX_SPREAD, Steadiness
from ridgeline.specs.catalog import parse_accelerator

GIB = 1 << 30


def quiet(**changes: object) -> Steadiness:
    fields: dict[str, object] = {
        "cores": 2,
        "load_start": 0.3,
        "load_end": 0.5,
        "probe_threads": 2,
        "first_bytes_per_s": 30e9,
        "again_bytes_per_s": 29e9,
        "one_thread_bytes_per_s": 20e9,
    }
    return Steadiness(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_quiet_machine_is_steady() -> None:
    s = quiet()
    assert s.steady and s.reasons == () and s.warning() == ""
    assert s.spread == pytest.approx(30 / 29)


def test_each_sign_of_load_is_named() -> None:
    loaded = quiet(load_end=6.9)
    assert loaded.reasons == ("load average 6.9 on 2 cores: other processes ran",)
    # the report's case: 1.52 GB/s read at two threads, 34.7 GB/s at one, then 7.5 again
    busy = quiet(first_bytes_per_s=1.52e9, again_bytes_per_s=7.5e9, one_thread_bytes_per_s=34.7e9)
    assert len(busy.reasons) == 2 and not busy.steady
    assert "repeated at the end gave 7.5 GB/s against 1.52 GB/s (4.93x apart)" in busy.reasons[0]
    assert "2 threads read 1.52 GB/s, less than one thread's 34.7 GB/s" in busy.reasons[1]
    assert busy.warning().startswith("measured under load: ")
    # just inside the spread allowed is steady
    assert quiet(again_bytes_per_s=30e9 / MAX_SPREAD * 1.001).steady


def test_steadiness_round_trips_through_a_dict() -> None:
    s = quiet(load_end=None, one_thread_bytes_per_s=None)
    d = s.to_dict()
    assert d["steady"] and d["reasons"] == [] and Steadiness.from_dict(d) == s


def calibration(steadiness: Steadiness | None) -> Calibration:
    spec = CalibrationSpec(sizes_bytes=(GIB,), threads=(1, 2), dtypes=("fp32",))
    bw = tuple(BandwidthPoint("read", GIB, t, v, v) for t, v in ((1, 34.7e9), (2, 1.52e9)))
    mm = (MatmulPoint("fp32", 2048, 2, 1e11),)
    return Calibration(spec, "test cpu", 32 << 20, 16 * GIB, bw, mm, steadiness=steadiness)


def test_a_flagged_calibration_says_so_in_the_spec_file() -> None:
    busy = quiet(first_bytes_per_s=1.52e9, again_bytes_per_s=7.5e9, one_thread_bytes_per_s=34.7e9)
    cal = calibration(busy)
    text = accelerator_toml(cal, "measured", 2)
    data = tomllib.loads(text)
    assert any(n.startswith("measured under load: ") for n in data["notes"])
    dram = next(lvl for lvl in data["levels"] if lvl["name"] == "dram")
    assert dram["bandwidth_bytes_per_s"]["value"] == pytest.approx(1.52e9)
    assert "UNDER LOAD" in dram["bandwidth_bytes_per_s"]["source"]
    acc = parse_accelerator(data, "test")  # still a loadable catalog file
    assert acc.device_bandwidth_bytes_per_s == pytest.approx(1.52e9)
    assert Calibration.from_dict(cal.to_dict()) == cal
    clean = tomllib.loads(accelerator_toml(calibration(quiet()), "measured", 2))
    assert "UNDER LOAD" not in str(clean) and len(clean["notes"]) == 1
