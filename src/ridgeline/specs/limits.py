"""Bounds on everything a user hands in: model sizes, work sizes, hardware numbers, files.

One table, read by every loader (config.json, chip TOML, traces, sweep specs, answer sheets) and
every face (CLI options, the explorer's API bodies). A value past one of these bounds is a typo or
an attack, not a workload: the largest published models and machines sit one to three orders of
magnitude inside them (Llama 3.1 405B: 126 layers, hidden 16,384, vocabulary 128,256;
DeepSeek-V3: 256 routed experts; Gemma 3: vocabulary 262,144; Cerebras WSE-3: 900,000 cores,
21 PB/s of SRAM bandwidth; Llama 4 Scout: a 10M-token context).

NOTE: these are policy limits, not facts about hardware or models, so they live here and not in
the catalog files.
"""

from __future__ import annotations

# ---- model shapes (config.json) --------------------------------------------------------------
MAX_LAYERS = 1_000
MAX_HIDDEN = 131_072
MAX_HEADS = 4_096
MAX_HEAD_DIM = 4_096
MAX_FFN = 1_048_576
MAX_VOCAB = 4_194_304
MAX_EXPERTS = 4_096
MAX_RANK = 65_536  # MLA latent and LoRA ranks

# ---- work: tokens, sequences, requests --------------------------------------------------------
MAX_CONTEXT = 100_000_000  # tokens of one sequence (also positions, windows, one request)
MAX_BATCH = 10_000_000  # sequences in one step
MAX_REQUESTS = 10_000_000  # requests of one simulated workload
MAX_BLOCK_SIZE = 65_536  # tokens per KV block
MAX_SEED = 2**32 - 1  # seeds of every generator (numpy's legacy range; fits SQLite and JSON)
MAX_CHIPS = 1_000_000  # chips of one deployment
MAX_DRAFT_TOKENS = 64  # speculative tokens per step

# ---- rates and times -------------------------------------------------------------------------
MAX_RATE_PER_S = 1e9  # request arrivals per second
MAX_SECONDS = 1e9  # any duration, SLO or arrival time (about 32 years)

# ---- hardware numbers (chip TOML) ------------------------------------------------------------
MAX_BYTES = 1e18  # capacity of one memory level (an exabyte)
MAX_BYTES_PER_S = 1e18  # bandwidth of one level or link
MAX_FLOPS_PER_S = 1e21  # peak of one chip
MAX_CORES = 100_000_000
MAX_COUNT = 1_000_000_000  # any other count (links, banks, instances, array dimension)

# ---- files -----------------------------------------------------------------------------------
MAX_DOCUMENT_BYTES = 16 * 2**20  # config.json, chip TOML, sweep spec, answer sheet
MAX_TRACE_LINE_BYTES = 16 * 2**20  # one line of a JSONL or CSV trace
