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
        ChipMemory,
        Collective,
        Deployment,
        DeploymentCost,
        Schedule,
        auto_deployment,
        bubble_fraction,
        deploy_step,
        deployment_cost,
        min_chips,
        ring_allreduce,
    )
    from ridgeline.analytic.kv import (
        Capacity,
        Technique,
        capacity,
        crossover_context,
        kv_bytes,
        kv_bytes_per_token,
        techniques,
        weights_bytes,
    )
    from ridgeline.analytic.ops import (
        MixedShape,
        OpTerms,
        StepShape,
        UniformShape,
        expected_distinct_experts,
        op_terms,
    )
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
        Efficiency,
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
    "Capacity",
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
    "capacity",
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
            "ChipMemory",
            "Collective",
            "Deployment",
            "DeploymentCost",
            "Schedule",
            "auto_deployment",
            "bubble_fraction",
            "deploy_step",
            "deployment_cost",
            "min_chips",
            "ring_allreduce",
        ),
        "ridgeline.analytic.kv": (
            "Capacity",
            "Technique",
            "capacity",
            "crossover_context",
            "kv_bytes",
            "kv_bytes_per_token",
            "techniques",
            "weights_bytes",
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
            "Efficiency",
            "OpCost",
            "StepCost",
            "Sweep",
            "decode_batching",
            "decode_intensity",
            "ridge_points",
            "step_cost",
            "sweep",
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
