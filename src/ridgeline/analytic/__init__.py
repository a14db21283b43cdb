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
    from ridgeline.analytic.architectures import DEFAULT_ACCELERATORS as DEFAULT_ACCELERATORS
    from ridgeline.analytic.architectures import ArchRow as ArchRow
    from ridgeline.analytic.architectures import Comparison as Comparison
    from ridgeline.analytic.architectures import binding_sentence as binding_sentence
    from ridgeline.analytic.architectures import compare as compare
    from ridgeline.analytic.binding import Resource as Resource
    from ridgeline.analytic.binding import Verdict as Verdict
    from ridgeline.analytic.chip_summary import AcceleratorSummary as AcceleratorSummary
    from ridgeline.analytic.chip_summary import accelerator_summary as accelerator_summary
    from ridgeline.analytic.chip_summary import ridge_points as ridge_points
    from ridgeline.analytic.deploy import Collective as Collective
    from ridgeline.analytic.deploy import DeploymentCost as DeploymentCost
    from ridgeline.analytic.deploy import Schedule as Schedule
    from ridgeline.analytic.deploy import deploy_step as deploy_step
    from ridgeline.analytic.deploy import deployment_cost as deployment_cost
    from ridgeline.analytic.deploy import ring_allreduce as ring_allreduce
    from ridgeline.analytic.deployment import ChipMemory as ChipMemory
    from ridgeline.analytic.deployment import Deployment as Deployment
    from ridgeline.analytic.deployment import auto_deployment as auto_deployment
    from ridgeline.analytic.deployment import bubble_fraction as bubble_fraction
    from ridgeline.analytic.deployment import min_chips as min_chips
    from ridgeline.analytic.kv import Technique as Technique
    from ridgeline.analytic.kv import crossover_context as crossover_context
    from ridgeline.analytic.kv import kv_bytes as kv_bytes
    from ridgeline.analytic.kv import kv_bytes_per_token as kv_bytes_per_token
    from ridgeline.analytic.kv import techniques as techniques
    from ridgeline.analytic.kv import weights_bytes as weights_bytes
    from ridgeline.analytic.memory import ChipBudget as ChipBudget
    from ridgeline.analytic.memory import KvFit as KvFit
    from ridgeline.analytic.memory import MemoryRule as MemoryRule
    from ridgeline.analytic.memory import chip_budget as chip_budget
    from ridgeline.analytic.memory import kv_fit as kv_fit
    from ridgeline.analytic.memory import kv_pool_blocks as kv_pool_blocks
    from ridgeline.analytic.memory import kv_pool_bytes as kv_pool_bytes
    from ridgeline.analytic.ops import MixedShape as MixedShape
    from ridgeline.analytic.ops import OpTerms as OpTerms
    from ridgeline.analytic.ops import StepShape as StepShape
    from ridgeline.analytic.ops import UniformShape as UniformShape
    from ridgeline.analytic.ops import expected_distinct_experts as expected_distinct_experts
    from ridgeline.analytic.ops import op_terms as op_terms
    from ridgeline.analytic.pricing import Efficiency as Efficiency
    from ridgeline.analytic.pricing import Pricing as Pricing
    from ridgeline.analytic.questions import FiveAnswers as FiveAnswers
    from ridgeline.analytic.questions import StepReads as StepReads
    from ridgeline.analytic.questions import decode_reads as decode_reads
    from ridgeline.analytic.questions import five_questions as five_questions
    from ridgeline.analytic.roofline import Bound as Bound
    from ridgeline.analytic.roofline import DecodeBatching as DecodeBatching
    from ridgeline.analytic.roofline import DecodeIntensity as DecodeIntensity
    from ridgeline.analytic.roofline import OpCost as OpCost
    from ridgeline.analytic.roofline import StepCost as StepCost
    from ridgeline.analytic.roofline import Sweep as Sweep
    from ridgeline.analytic.roofline import decode_batching as decode_batching
    from ridgeline.analytic.roofline import decode_intensity as decode_intensity
    from ridgeline.analytic.roofline import step_cost as step_cost
    from ridgeline.analytic.roofline import sweep as sweep
    from ridgeline.analytic.summaries import KvSummary as KvSummary
    from ridgeline.analytic.summaries import ModelSummary as ModelSummary
    from ridgeline.analytic.summaries import kv_curve as kv_curve
    from ridgeline.analytic.summaries import kv_summary as kv_summary
    from ridgeline.analytic.summaries import model_summary as model_summary
    from ridgeline.analytic.workload import Dtypes as Dtypes
    from ridgeline.analytic.workload import Phase as Phase
    from ridgeline.analytic.workload import Workload as Workload

__getattr__, __dir__ = lazy_exports(__name__, __file__)
