"""The command lines a user types to run a layout: vLLM (``vllm serve``) and SGLang
(``sglang.launch_server``), one line per instance kind.

Flags (vLLM engine arguments and SGLang server arguments, as their docs name them):

==========================  ==============================  =================================
what                        vLLM                            SGLang
==========================  ==============================  =================================
tensor / pipeline parallel  --tensor-parallel-size,         --tp-size, --pp-size
                            --pipeline-parallel-size
expert parallel             --enable-expert-parallel        --ep-size
sequences at once           --max-num-seqs                  --max-running-requests
token budget of a step      --max-num-batched-tokens        --chunked-prefill-size
KV format                   --kv-cache-dtype fp8            --kv-cache-dtype fp8_e4m3
weights                     --quantization fp8 | ...        --quantization fp8 | ...
memory for weights + KV     --gpu-memory-utilization        --mem-fraction-static
prefill / decode split      --kv-transfer-config (NIXL)     --disaggregation-mode prefill|decode
==========================  ==============================  =================================

Where each engine runs is a fact about the engines, not the chips' numbers: vLLM on NVIDIA and
AMD GPUs, TPUs (vLLM TPU), Xeon CPUs and IBM Spyre (the vllm-spyre plugin); SGLang on NVIDIA
and AMD GPUs and Xeon CPUs. Groq and Cerebras serve through their own stacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ridgeline.plan.space import Layout, Split
from ridgeline.specs import Accelerator
from ridgeline.specs.dtypes import DType
from ridgeline.specs.runtime_memory import runtime_memory

_VLLM_KINDS = ("gpu", "tpu", "cpu", "dataflow")  # dataflow: IBM Spyre (vllm-spyre)
_SGLANG_KINDS = ("gpu", "cpu")
# what each weight format asks of the engine (fp8: quantized on load from a 16-bit checkpoint;
# the others need a checkpoint in that format)
_QUANTIZATION = {
    DType.FP8: "fp8",
    DType.FP4: "modelopt_fp4",
    DType.INT8: "gptq",
    DType.INT4: "awq",
}
_NIXL = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''


@dataclass(frozen=True, slots=True)
class EngineCommands:
    """One engine's command lines for a layout (``lines`` empty where it does not run)."""

    engine: str
    lines: tuple[str, ...]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "lines": list(self.lines), "note": self.note}


def _vllm(layout: Layout, split: Split, mem: float, role: str | None) -> str:
    parts = [
        "vllm serve $MODEL",
        f"--tensor-parallel-size {split.tensor}",
        f"--pipeline-parallel-size {split.pipeline}",
        f"--max-num-seqs {layout.knobs.max_num_seqs}",
        f"--max-num-batched-tokens {layout.knobs.max_num_batched_tokens}",
        f"--gpu-memory-utilization {mem:g}",
    ]
    if split.expert > 1:
        parts.append("--enable-expert-parallel")
    if layout.formats.kv is DType.FP8:
        parts.append("--kv-cache-dtype fp8")
    if layout.formats.weight in _QUANTIZATION:
        parts.append(f"--quantization {_QUANTIZATION[layout.formats.weight]}")
    if role is not None:
        parts.append(f"--kv-transfer-config {_NIXL}")
    return " ".join(parts)


def _sglang(layout: Layout, split: Split, mem: float, role: str | None) -> str:
    parts = [
        "python -m sglang.launch_server --model-path $MODEL",
        f"--tp-size {split.tensor}",
        f"--pp-size {split.pipeline}",
        f"--max-running-requests {layout.knobs.max_num_seqs}",
        f"--chunked-prefill-size {layout.knobs.max_num_batched_tokens}",
        f"--mem-fraction-static {mem:g}",
    ]
    if split.expert > 1:
        parts.append(f"--ep-size {split.expert}")
    if layout.formats.kv is DType.FP8:
        parts.append("--kv-cache-dtype fp8_e4m3")
    if layout.formats.weight in _QUANTIZATION:
        parts.append(f"--quantization {_QUANTIZATION[layout.formats.weight]}")
    if role is not None:
        parts.append(f"--disaggregation-mode {role} --disaggregation-transfer-backend nixl")
    return " ".join(parts)


def _lines(layout: Layout, acc: Accelerator, engine: str) -> tuple[str, ...]:
    make = _vllm if engine == "vllm" else _sglang
    mem = runtime_memory(acc).memory_utilization
    if layout.prefill is None:
        return (make(layout, layout.decode, mem, None),)
    return (
        f"# {_each(layout.num_prefill, 'prefill instance')}:",
        make(layout, layout.prefill, mem, "prefill"),
        f"# {_each(layout.num_decode, 'decode instance')}:",
        make(layout, layout.decode, mem, "decode"),
    )


def _count(n: int, what: str) -> str:
    """``1 replica``, ``3 replicas``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _each(n: int, what: str) -> str:
    """``the decode instance``, ``each of the 5 prefill instances``."""
    return f"the {what}" if n == 1 else f"each of the {n} {what}s"


def commands(layout: Layout, acc: Accelerator, copies: int) -> tuple[EngineCommands, ...]:
    """vLLM's and SGLang's command lines for ``copies`` copies of ``layout`` on ``acc``."""
    if layout.prefill is None:
        spread = f"{_count(copies, 'replica')} behind a load balancer"
    else:
        spread = (
            f"{_count(copies, 'unit')} of {_count(layout.num_prefill, 'prefill instance')} and "
            f"{_count(layout.num_decode, 'decode instance')}, behind a router that sends each "
            "request to a prefill then a decode instance (vLLM's disaggregated proxy; "
            "sglang_router --pd-disaggregation)"
        )
    out = []
    for engine, kinds in (("vllm", _VLLM_KINDS), ("sglang", _SGLANG_KINDS)):
        if acc.kind in kinds:
            out.append(EngineCommands(engine, _lines(layout, acc, engine), spread))
        else:
            note = f"{engine} does not run on {acc.name} ({acc.kind}); use the vendor's stack"
            out.append(EngineCommands(engine, (), note))
    return tuple(out)
