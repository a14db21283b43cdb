"""analytic: closed-form models of inference cost — roofline, per-operator FLOPs and bytes,
KV sizing, the five questions, deployments of many chips (tensor and pipeline parallelism), the
five-architecture comparison; tiling against a scratchpad (``tiling``), banks/alignment/access
order (``layout``), FlashAttention IO (``flash``), the compiled schedule of a scratchpad
accelerator (``dataflow``) and three orchestrators of one KV cache (``orchestrate``) — import
those as submodules.

Layer rule: imports ``specs`` (and ``errors``) only; never torch, never a lower layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ridgeline.specs.lazy import lazy_exports

if TYPE_CHECKING:
    from ridgeline.analytic.architectures import (
        DEFAULT_ACCELERATORS,
        ArchRow,
        Comparison,
        binding_sentence,
        compare,
    )
    from ridgeline.analytic.binding import Resource, Verdict
    from ridgeline.analytic.deploy import (
        Collective,
        DeploymentCost,
        Schedule,
        deploy_step,
        deployment_cost,
        ring_allreduce,
    )
    from ridgeline.analytic.deployment import (
        ChipMemory,
        Deployment,
        auto_deployment,
        bubble_fraction,
        min_chips,
    )
    from ridgeline.analytic.kv import (
        Technique,
        crossover_context,
        kv_bytes,
        kv_bytes_per_token,
        techniques,
        weights_bytes,
    )
    from ridgeline.analytic.memory import (
        ChipBudget,
        KvFit,
        MemoryRule,
        chip_budget,
        kv_fit,
        kv_pool_blocks,
        kv_pool_bytes,
    )
    from ridgeline.analytic.ops import (
        MixedShape,
        OpTerms,
        StepShape,
        UniformShape,
        expected_distinct_experts,
        op_terms,
    )
    from ridgeline.analytic.pricing import Efficiency, Pricing
    from ridgeline.analytic.questions import (
        FiveAnswers,
        StepReads,
        decode_reads,
        five_questions,
    )
    from ridgeline.analytic.roofline import (
        Bound,
        DecodeBatching,
        DecodeIntensity,
        OpCost,
        StepCost,
        Sweep,
        decode_batching,
        decode_intensity,
        ridge_points,
        step_cost,
        sweep,
    )
    from ridgeline.analytic.summaries import (
        AcceleratorSummary,
        KvSummary,
        ModelSummary,
        accelerator_summary,
        kv_curve,
        kv_summary,
        model_summary,
    )
    from ridgeline.analytic.workload import Dtypes, Phase, Workload

__all__ = [
    "AcceleratorSummary",
    "KvSummary",
    "ModelSummary",
    "accelerator_summary",
    "kv_curve",
    "kv_summary",
    "model_summary",
    "DEFAULT_ACCELERATORS",
    "ArchRow",
    "ChipMemory",
    "Collective",
    "Deployment",
    "DeploymentCost",
    "Schedule",
    "auto_deployment",
    "binding_sentence",
    "bubble_fraction",
    "deploy_step",
    "deployment_cost",
    "min_chips",
    "ring_allreduce",
    "Bound",
    "ChipBudget",
    "KvFit",
    "MemoryRule",
    "Pricing",
    "chip_budget",
    "kv_fit",
    "kv_pool_blocks",
    "kv_pool_bytes",
    "Comparison",
    "DecodeBatching",
    "DecodeIntensity",
    "Dtypes",
    "Efficiency",
    "FiveAnswers",
    "OpCost",
    "OpTerms",
    "Phase",
    "Resource",
    "StepCost",
    "StepReads",
    "StepShape",
    "UniformShape",
    "Verdict",
    "MixedShape",
    "Sweep",
    "Technique",
    "Workload",
    "compare",
    "crossover_context",
    "decode_batching",
    "decode_intensity",
    "decode_reads",
    "expected_distinct_experts",
    "five_questions",
    "kv_bytes",
    "kv_bytes_per_token",
    "op_terms",
    "ridge_points",
    "step_cost",
    "sweep",
    "techniques",
    "weights_bytes",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ridgeline.analytic.architectures": (
            "DEFAULT_ACCELERATORS",
            "ArchRow",
            "Comparison",
            "binding_sentence",
            "compare",
        ),
        "ridgeline.analytic.binding": ("Resource", "Verdict"),
        "ridgeline.analytic.deploy": (
            "Collective",
            "DeploymentCost",
            "Schedule",
            "deploy_step",
            "deployment_cost",
            "ring_allreduce",
        ),
        "ridgeline.analytic.deployment": (
            "ChipMemory",
            "Deployment",
            "auto_deployment",
            "bubble_fraction",
            "min_chips",
        ),
        "ridgeline.analytic.kv": (
            "Technique",
            "crossover_context",
            "kv_bytes",
            "kv_bytes_per_token",
            "techniques",
            "weights_bytes",
        ),
        "ridgeline.analytic.memory": (
            "ChipBudget",
            "KvFit",
            "MemoryRule",
            "chip_budget",
            "kv_fit",
            "kv_pool_blocks",
            "kv_pool_bytes",
        ),
        "ridgeline.analytic.ops": (
            "MixedShape",
            "OpTerms",
            "StepShape",
            "UniformShape",
            "expected_distinct_experts",
            "op_terms",
        ),
        "ridgeline.analytic.questions": (
            "FiveAnswers",
            "StepReads",
            "decode_reads",
            "five_questions",
        ),
        "ridgeline.analytic.roofline": (
            "Bound",
            "DecodeBatching",
            "DecodeIntensity",
            "OpCost",
            "StepCost",
            "Sweep",
            "decode_batching",
            "decode_intensity",
            "ridge_points",
            "step_cost",
            "sweep",
        ),
        "ridgeline.analytic.pricing": (
            "Efficiency",
            "Pricing",
        ),
        "ridgeline.analytic.summaries": (
            "AcceleratorSummary",
            "KvSummary",
            "ModelSummary",
            "accelerator_summary",
            "kv_curve",
            "kv_summary",
            "model_summary",
        ),
        "ridgeline.analytic.workload": (
            "Dtypes",
            "Phase",
            "Workload",
        ),
    },
)
