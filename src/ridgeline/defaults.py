"""The one default accelerator and model of every analytic and serving entry point (CLI
options, the explorer's forms, the report), the five architectures compared, and the planner's
defaults, kept in one place. No imports: the CLI reads it (a command's --help shows these
defaults) without loading any layer.

Layer rule: imports nothing; every layer may import it.
"""

DEFAULT_ACCELERATOR = "h100-sxm"
DEFAULT_MODEL = "llama-3.1-8b"
# The engine and the lab run a real model on this machine's CPU: a small one.
DEFAULT_ENGINE_MODEL = "distilgpt2"
# A deployment's serving limits where ``predict`` is given none (fidelity.prediction).
DEFAULT_MAX_SEQS = 256  # vLLM's max_num_seqs
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # the step token budget: TensorRT-LLM's max_num_tokens
# What ``plan`` simulates where not told (plan.request; the CLI's --help shows them without
# loading the planner).
DEFAULT_SIMULATED = 3  # layouts simulated per accelerator (the bound's best, diverse)
DEFAULT_PROBE_S = 60.0  # seconds of arrivals per simulation (the sweep's full searches use 60)
DEFAULT_PROBE_REQUESTS = 4000
# One accelerator per architecture of the course (module 4): GPU, TPU, wafer-scale, LPU, dataflow.
# Every face that compares the five (compare, kv-manage, orchestrate, flash, the report, the
# notebooks, the quiz) takes them from here (or from ``specs.catalog``, which re-exports them),
# so no table mixes a TPU v6e with a v5e.
FIVE_ARCHITECTURES = ("h100-sxm", "tpu-v5e", "cerebras-wse3", "groq-lpu", "ibm-spyre")
GPU, TPU, WAFER, LPU, DATAFLOW = FIVE_ARCHITECTURES
