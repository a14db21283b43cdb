"""The question bank: every generator, with the course module it belongs to."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ridgeline.quiz.generators import (
    m1_ridge,
    m2_roofline,
    m3_managers,
    m4_architectures,
    m5_tiling,
    m6_kv_sizing,
    m6_recompute,
    m7_costs,
    m7_kv_runtime,
)
from ridgeline.quiz.types import Module, Question


@dataclass(frozen=True, slots=True)
class Generator:
    """A parametric question: ``make(rng)`` draws parameters and computes the answer."""

    name: str
    module: Module
    make: Callable[[random.Random], Question]


GENERATORS: tuple[Generator, ...] = (
    Generator("ridge_point", Module.RIDGE, m1_ridge.ridge_point),
    Generator("weights_intensity", Module.RIDGE, m1_ridge.weights_intensity),
    Generator("kv_intensity", Module.RIDGE, m1_ridge.kv_intensity),
    Generator("phase_bound", Module.ROOFLINE, m2_roofline.phase_bound),
    Generator("rank_ridge", Module.ROOFLINE, m2_roofline.rank_ridge),
    Generator("spyre_reads", Module.ROOFLINE, m2_roofline.spyre_reads),
    Generator("attainable", Module.ROOFLINE, m2_roofline.attainable),
    Generator("match_managers", Module.MANAGERS, m3_managers.match_managers),
    Generator("who_manages", Module.MANAGERS, m3_managers.who_manages),
    Generator("no_cache", Module.MANAGERS, m3_managers.no_cache),
    Generator("scarce_resource", Module.ARCHITECTURES, m4_architectures.scarce_resource),
    Generator("chips_to_hold", Module.ARCHITECTURES, m4_architectures.chips_to_hold),
    Generator("rank_memory", Module.ARCHITECTURES, m4_architectures.rank_memory),
    Generator("spyre_tile", Module.TILING, m5_tiling.spyre_tile),
    Generator("tile_intensity", Module.TILING, m5_tiling.tile_intensity),
    Generator("flash_block", Module.TILING, m5_tiling.flash_block),
    Generator("bank_conflict", Module.TILING, m5_tiling.bank_conflict),
    Generator("kv_size", Module.KV_SIZING, m6_kv_sizing.kv_size),
    Generator("kv_crossover", Module.KV_SIZING, m6_kv_sizing.kv_crossover),
    Generator("kv_saving", Module.KV_SIZING, m6_kv_sizing.kv_saving),
    Generator("kv_per_token", Module.KV_SIZING, m6_kv_sizing.kv_per_token),
    Generator("recompute_cache", Module.KV_SIZING, m6_recompute.recompute_cache),
    Generator("paged_blocks", Module.KV_RUNTIME, m7_kv_runtime.paged_blocks_gen),
    Generator("contiguous_waste", Module.KV_RUNTIME, m7_kv_runtime.contiguous_waste),
    Generator("prefix_savings", Module.KV_RUNTIME, m7_kv_runtime.prefix_savings),
    Generator("spec_decode", Module.KV_RUNTIME, m7_kv_runtime.spec_decode),
    Generator("static_waste", Module.KV_RUNTIME, m7_costs.static_waste),
    Generator("chunked_gap", Module.KV_RUNTIME, m7_costs.chunked_gap),
    Generator("disagg_transfer", Module.KV_RUNTIME, m7_costs.disagg_transfer),
    Generator("tier_transfer", Module.KV_RUNTIME, m7_costs.tier_transfer),
    Generator("bucket_padding", Module.KV_RUNTIME, m7_costs.bucket_padding),
    Generator("spyre_technique", Module.KV_RUNTIME, m7_costs.spyre_technique),
)


def generators_for(module: Module) -> list[Generator]:
    """The generators of one course module, in bank order."""
    return [g for g in GENERATORS if g.module is module]
