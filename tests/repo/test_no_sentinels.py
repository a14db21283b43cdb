"""Absent values are None, not sentinels: a request's prefix hit before admission, a request that
fits, a load average the system does not report, an old record's -1.0, a left-out prediction that
was not run, the error of a fit on no rows; and a finish reason is a ``FinishReason``, never a
string compared by value (docs/design.md, "Code rules")."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

import ridgeline
from ridgeline.fidelity.dataset import load_dataset
from ridgeline.fidelity.fit import fit_family
from ridgeline.fidelity.validate import RowResult, Summary, percent_or
from ridgeline.lab import env
from ridgeline.lab.gap import _load_average
from serving_helpers import make_scheduler, req


def test_num_cached_tokens_is_none_until_admitted_then_the_hit() -> None:
    sched, ex = make_scheduler(16, prefix_caching=True)
    a, b = req("a", list(range(9))), req("b", list(range(9)))
    assert a.num_cached_tokens is None
    sched.add_request(a)
    batch = sched.schedule()
    sched.update(batch, ex.execute(batch))
    assert a.num_cached_tokens == 0  # admitted, nothing cached yet
    sched.add_request(b)
    sched.schedule()
    assert b.num_cached_tokens == 8  # two full blocks of 4 shared with a


def test_never_fits_is_none_for_a_request_that_fits() -> None:
    sched, _ = make_scheduler(4, max_model_len=64)
    assert sched.never_fits(req("ok", 4).max_total_tokens) is None
    assert (
        sched.never_fits(req("big", 40).max_total_tokens)
        == "larger than the KV pool: 42 tokens > 16 slots"
    )


def test_an_unknown_load_average_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert env.load_average() is None
    assert _load_average(-1.0) is None and _load_average(0.5) == 0.5


def test_a_validation_without_the_left_out_refits_says_none_not_nan() -> None:
    row = load_dataset()[0]
    skipped = RowResult(row, ideal=row.value, calibrated=row.value, loso=None)
    assert skipped.loso_ratio is None and skipped.loso_error is None
    payload = json.loads(json.dumps(skipped.to_dict(), allow_nan=False))  # NaN would raise
    assert payload["loso"] is None and payload["ratio_loso"] is None
    assert Summary.of("all", [skipped]).loso_median_error is None
    assert percent_or(None) == "not run" and percent_or(0.085) == "8%"
    run = RowResult(row, ideal=row.value, calibrated=row.value, loso=2.0 * row.value)
    assert run.loso_ratio == 2.0 and Summary.of("all", [run]).loso_median_error == 1.0


def test_a_fit_on_no_rows_has_no_error_rather_than_nan() -> None:
    from ridgeline.specs.calibration import get_family

    assert fit_family(get_family("nvidia-gpu"), []).mean_abs_log_error is None


FINISH_WORDS = {"length", "stop", "abort", "rejected", "unfinished"}


def _is_finish_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in FINISH_WORDS


def _string_finish_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing a ``finish_reason`` with a string literal, passing one as it, or falling
    back to one (``reason.value if reason else "unfinished"``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(x, ast.Attribute) and x.attr == "finish_reason" for x in sides)
            if named and any(_is_finish_word(x) for x in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg == "finish_reason":
            if _is_finish_word(node.value):
                lines.append(node.value.lineno)
        elif isinstance(node, ast.IfExp) and _is_finish_word(node.orelse):
            lines.append(node.lineno)
    return lines


def test_finish_reasons_are_enums_across_the_seams() -> None:
    """Regression: ``serve.app`` compared finish reasons with "rejected" and "abort", and the
    engine reported "unfinished" for a request without one."""
    root = Path(ridgeline.__file__).parent
    found = {
        f"{path.relative_to(root)}:{line}"
        for path in sorted(root.rglob("*.py"))
        for line in _string_finish_comparisons(ast.parse(path.read_text()))
    }
    assert found == set()
    probe = ast.parse('if e.finish_reason == "abort": pass\nx = r.value if r else "unfinished"')
    assert _string_finish_comparisons(probe) == [1, 2]
