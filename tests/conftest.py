"""Test tiers: unit tests need no torch; ``torch`` tests run on the CPU and are skipped when torch
is not installed; ``gpu`` tests need CUDA; ``bench`` is opt-in; ``slow`` marks what takes more
than about half a second on a quiet 2-core machine (processes, servers, browsers, whole reports and
sweeps, the README's commands, the notebooks), so that ``make test-fast`` (no torch, not slow)
stays under 20 s. ``make test`` runs every tier but ``gpu`` and ``bench``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# Whole modules that start processes, servers or browsers.
SLOW_MODULES = {"test_web_browser.py", "test_web_schema.py", "test_readme.py", "test_notebooks.py"}
# Single tests over a second (measured with --durations), by name.
SLOW_TESTS = {
    "test_local_pool_and_ray_give_identical_results",
    "test_cli_run_status_report",
    "test_report_writes_three_files",
    "test_killed_cli_sweep_resumes_with_each_point_once",
    "test_report_serving_section",
    "test_two_processes_submitting_at_once_lose_nothing",
    "test_parquet_store_round_trips",
    "test_simulate_compare_table_and_plots",
    "test_cli_commands_run",
    "test_capacity_on_the_simulator_matches_the_hand_computed_rate",
    "test_interrupted_sweep_resumes_and_stores_each_point_once",
    "test_cli_schedule_json_and_timeline",
    "test_early_stopping_stops_dominated_configurations",
    "test_roofline_json_and_plot",
    "test_early_stopping_compares_configurations_of_one_model_only",
    "test_a_store_reused_with_another_spec_reports_only_that_spec",
    "runTest",  # the Hypothesis state machine of the block pool
    "test_orders_and_matches_are_well_formed",
    "test_every_distractor_is_outside_the_tolerance",
    "test_report_ranks_and_finds_the_front",
    "test_classic_mistakes_fail_the_questions_they_target",
    "test_router_assignments",
    "test_closed_form_matches_steps_when_admission_waits_for_memory",
    "test_duration_mode_takes_rate_times_duration_requests",
    "test_schedule_bytes_equal_analytic_plus_declared_reloads",
    "test_overload_completes_or_rejects_every_request_and_never_exceeds_memory",
    "test_a_quiz_covers_all_seven_modules",
    "test_simulation_runs_with_progress_and_returns_its_curves",
    "test_paged_beats_contiguous_reservation_on_waste_and_concurrency",
    "test_a_tile_that_does_not_fit_is_never_chosen",
    "test_intensity_never_drops_as_the_tile_grows",
    "test_a_simulation_past_the_time_limit_is_stopped",
    "test_shutdown_stops_a_running_simulation",
    "test_three_attempts_the_highest_counts_and_a_fourth_is_refused",
    "test_interactive_run_driven_by_stdin",
    "test_automatic_deployment_holds_weights_plus_kv",
    "test_chunked_prefill_shortens_the_inter_token_latency_tail",
    "test_gamma_arrivals_keep_the_mean_rate_and_are_burstier",
    "test_spec_decode_tokens_per_step_match_the_formula",
    "test_every_request_finishes_or_is_rejected_and_no_block_leaks",
    "test_closed_form_decode_runs_give_the_step_by_step_result",
    "test_single_chip_questions_only_draw_workloads_that_fit_the_chip",
    "test_trace_spec_decode_disagg_and_tiers_options",
    "test_prefix_caching_cuts_ttft_and_raises_throughput_on_shared_prefixes",
    "test_a_learner_making_the_classic_mistakes_fails_the_quiz",
    "test_more_tensor_parallel_chips_never_fewer_link_bytes",
    "test_explore_command_is_registered_and_the_cli_starts_without_fastapi",
    "test_pass_threshold_is_80_percent",
    "test_calibrated_time_is_never_below_ideal",
    "test_failing_attempts_do_not_pass",
    "test_simulate_json_reports_one_result",
    "test_page_openapi_and_plotly_are_served",
    "test_bytes_and_flops_never_decrease",
    "test_a_response_is_right_exactly_when_inside_the_tolerance",
    "test_capacity_search_finds_the_hand_computed_rate",
    "test_cli_startup_does_not_import_torch",
    "test_misalignment_costs_at_most_one_granule",
    "test_bank_conflict_degree_is_gcd_with_32_banks",
    "test_compare_cli_names_each_deployment",
    "test_prefill_microbatches_are_prompt_chunks_with_exact_sums",
    "test_an_interrupted_attempt_does_not_count",
    "test_wrong_answers_get_worked_solutions",
    "test_sheet_errors_are_one_line",
    "test_a_perfect_sheet_passes_and_shows_in_status",
    "test_a_stop_is_only_ever_a_certain_miss",
    "test_the_tier_reproducer_of_the_issue_finishes_every_request",
    "test_a_seeded_session_exercises_every_path",
    "test_static_tpot_is_above_paged_by_the_padding_ratio",
    "test_fast_mode_matches_stepping_on_drawn_workloads",
    "test_fast_mode_gives_the_step_by_step_result",
    "test_closed_form_runs_match_stepping_with_caching_tiers_spec_and_disagg",
    "test_a_split_deployment_gives_the_step_by_step_result",
    "test_each_architecture_says_who_allocates_and_where_kv_lives",
    # about half a second or more each, and together a third of the fast tier
    "test_no_file_over_the_limit",
    "test_no_identical_block_twice",
    "test_no_function_over_the_limit",
    "test_known_exceptions_still_apply",
    "test_piped_output_is_not_wrapped",
    "test_technique_effects_are_the_simulators_numbers",
    "test_docs_readme_and_docstrings_describe_the_current_state",
    "test_affine_maxima_equal_the_sum",
    "test_a_simulation_loads_no_heavy_module",
    "test_spyre_decode_reads_by_category_by_hand",
    "test_chosen_blocks_fit_vmem_double_buffered",
    "test_every_module_respects_its_layer",
    "test_layout_cli_json_and_plot",
    "test_kv_manage_cli_json",
    "test_every_fitted_model_is_physical",
    "test_phase_bound_key_does_not_hang_on_activation_bytes",
    "test_deciding_probes_early_changes_no_decision_and_no_probe_that_met",
    "test_guidellm_accepts_the_scenario_and_the_tokenizer_decodes_every_id",
    "test_sum_of_maxima_pieces_equal_the_sum",
    "test_sum_of_max_of_two_lines_is_closed_form",
    "test_compare_prints_where_the_gemm_time_came_from",
    "test_the_fit_recovers_known_terms",
    "test_without_the_ring_every_core_rereads_what_the_ring_carried",
    "test_prefill_runs_one_program_per_compiled_chunk",
    "test_a_command_refuses_in_one_line",  # the bad-input corpus through the CLI, 150 runs
    "test_importing_the_plots_leaves_the_backend_alone",  # a fresh interpreter
}


def _is_slow(item: pytest.Item) -> bool:
    name = getattr(item, "originalname", None) or item.name
    return item.path.name in SLOW_MODULES or name in SLOW_TESTS


TORCH_MODULE = "pytestmark = pytest.mark.torch"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m 'not torch ...'`` a torch module is not even imported (importing torch takes
    seconds of the fast tier)."""
    markexpr = config.getoption("markexpr", "") or ""
    if collection_path.suffix != ".py":
        return None
    if "not slow" in markexpr and collection_path.name in SLOW_MODULES:
        return True  # nor a module that is slow as a whole (schemathesis, playwright, nbclient)
    skip = "not torch" in markexpr and TORCH_MODULE in collection_path.read_text()
    return True if skip else None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_torch = importlib.util.find_spec("torch") is not None
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        if "torch" in item.keywords and not has_torch:
            item.add_marker(
                pytest.mark.skip(reason="torch is not installed (pip install .[torch])")
            )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "gpu" in item.keywords:
        torch = pytest.importorskip("torch", reason="torch is not installed")
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")


@pytest.fixture(autouse=True)
def _quiz_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own quiz home (the learners' ledger), never the user's own."""
    monkeypatch.setenv("RIDGELINE_QUIZ_HOME", str(tmp_path_factory.mktemp("quiz-home")))
