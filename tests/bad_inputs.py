"""The bad-input corpus: malformed files for every loader, bad options for every CLI command and
bad bodies for every API endpoint, each with the text its one-line refusal must contain.

Cases are data: ``test_bad_inputs`` runs each and checks the refusal is clean (a ``ConfigError``,
exit 2 with one line on stderr, or a 4xx naming the field), never a traceback, a hang or exit 0.
Files are written under the test's ``tmp_path``; ``{tmp}`` in CLI arguments stands for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"
NOT_UTF8 = b"model_type = \xff\xfe\n"


@dataclass(frozen=True)
class FileCase:
    """A file handed to a loader (``content`` None: a directory in its place)."""

    id: str
    loader: str
    name: str
    content: bytes | None
    needle: str


@dataclass(frozen=True)
class CliCase:
    """A command line; ``files`` are written under ``{tmp}`` first; ``env`` is set (``{tmp}``
    in its values too)."""

    id: str
    args: tuple[str, ...]
    needle: str
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiCase:
    """A request to the explorer: a JSON ``body``, or ``raw`` bytes."""

    id: str
    method: str
    path: str
    status: int
    needle: str
    body: Any = None
    raw: bytes | None = None


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _catalog_config(name: str) -> dict[str, Any]:
    text = resources.files("ridgeline.data").joinpath("models", f"{name}.json").read_text()
    return dict(json.loads(text))


LLAMA = _catalog_config("llama-3.1-8b")
MIXTRAL = _catalog_config("mixtral-8x7b")
GPT2 = _catalog_config("gpt2")
CHIP = (DATA / "mychip.toml").read_text()
SPEC = """
[sweep]
name = "s"
models = ["llama-3.1-8b"]
accelerators = ["h100-sxm"]

[[workloads]]
name = "w"
arrival = "uniform"
prompt_tokens = 100
output_tokens = 10
num_requests = 10

[slo]
ttft_s = 1.0
tpot_s = 0.1
"""
TRACE_OK = {"arrival_s": 0.5, "prompt_len": 10, "output_len": 2}

# ---- config.json --------------------------------------------------------------------------

INT_FIELDS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "head_dim",
    "max_position_embeddings",
)
BAD_INTS: tuple[tuple[str, Any], ...] = (
    ("negative", -128),
    ("zero", 0),
    ("fraction", 1.5),
    ("text", "abc"),
    ("huge", 10**30),
    ("huge-float", 1e30),
    ("bool", True),
    ("list", [4096]),
    ("object", {"v": 1}),
)


def _config_cases() -> list[FileCase]:
    cases = [
        FileCase(f"config-{f}-{tag}", "config", "config.json", _json({**LLAMA, f: v}), f)
        for f in INT_FIELDS
        for tag, v in BAD_INTS
    ]
    special: list[tuple[str, bytes, str]] = [
        ("binary", BINARY, "binary"),
        ("not-utf8", b'{"model_type": "\xff"}', "not UTF-8"),
        ("empty", b"", "not valid JSON"),
        ("syntax", b'{"model_type": "llama",', "not valid JSON"),
        ("nan", json.dumps({**LLAMA, "rope_theta": float("nan")}).encode(), "NaN"),
        ("infinity", b'{"model_type": "llama", "rope_theta": Infinity}', "Infinity"),
        ("overflow-float", json.dumps(LLAMA)[:-1].encode() + b', "rope_theta": 1e999}', "rope"),
        ("5000-digits", b'{"model_type": "llama", "hidden_size": ' + b"9" * 5000 + b"}", "JSON"),
        ("deep", b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        ("list", b"[1, 2, 3]", "expected a JSON object"),
        ("string", b'"llama"', "expected a JSON object"),
        ("no-model-type", _json({"hidden_size": 64}), "model_type"),
        ("model-type-list", _json({**LLAMA, "model_type": ["llama"]}), "model_type"),
        ("model-type-unknown", _json({**LLAMA, "model_type": "mamba"}), "model_type"),
        ("kv-heads-indivisible", _json({**LLAMA, "num_key_value_heads": 3}), "num_key_value"),
        ("kv-heads-above-heads", _json({**LLAMA, "num_key_value_heads": 64}), "num_key_value"),
        ("rope-theta-text", _json({**LLAMA, "rope_theta": "big"}), "rope_theta"),
        ("rope-theta-negative", _json({**LLAMA, "rope_theta": -1}), "rope_theta"),
        ("rms-eps-zero", _json({**LLAMA, "rms_norm_eps": 0}), "rms_norm_eps"),
        ("tie-text", _json({**LLAMA, "tie_word_embeddings": "yes"}), "tie_word_embeddings"),
        ("rope-params-list", _json({**LLAMA, "rope_parameters": [1]}), "rope_parameters"),
        ("top-k-above-experts", _json({**MIXTRAL, "num_experts_per_tok": 9}), "num_experts_per"),
        ("experts-huge", _json({**MIXTRAL, "num_local_experts": 10**6}), "num_local_experts"),
        ("experts-zero", _json({**MIXTRAL, "num_local_experts": 0}), "num_local_experts"),
        ("gpt2-n-inner-text", _json({**GPT2, "n_inner": "big"}), "n_inner"),
        ("gpt2-n-inner-negative", _json({**GPT2, "n_inner": -100}), "n_inner"),
        ("gpt2-n-embd-indivisible", _json({**GPT2, "n_embd": 770}), "n_embd"),
        ("gpt2-layers-huge", _json({**GPT2, "n_layer": 1_000_000}), "n_layer"),
        ("layer-types-short", _json({**LLAMA, "layer_types": ["full_attention"]}), "layer_types"),
        ("window-negative", _json({**LLAMA, "sliding_window": -4}), "sliding_window"),
        (
            "qwen-mlp-only-dicts",
            _json(
                {
                    **LLAMA,
                    "model_type": "qwen2_moe",
                    "num_experts": 4,
                    "num_experts_per_tok": 2,
                    "moe_intermediate_size": 64,
                    "mlp_only_layers": [{"a": 1}],
                }
            ),
            "mlp_only_layers",
        ),
    ]
    cases += [FileCase(f"config-{tag}", "config", "config.json", c, n) for tag, c, n in special]
    cases.append(FileCase("config-directory", "config", "model", None, "no such file"))
    return cases


# ---- chip TOML ----------------------------------------------------------------------------

CHIP_EDITS: tuple[tuple[str, str, str, str], ...] = (
    ("capacity-negative", "value = 8e9", "value = -8e9", "capacity_bytes"),
    ("capacity-zero", "value = 8e9", "value = 0", "capacity_bytes"),
    ("capacity-inf", "value = 8e9", "value = inf", "capacity_bytes"),
    ("capacity-nan", "value = 8e9", "value = nan", "capacity_bytes"),
    ("capacity-huge", "value = 8e9", "value = 1e30", "capacity_bytes"),
    ("capacity-text", "value = 8e9", 'value = "8 GB"', "capacity_bytes"),
    ("bandwidth-inf", "value = 5e11", "value = inf", "bandwidth_bytes_per_s"),
    ("bandwidth-negative", "value = 5e11", "value = -5e11", "bandwidth_bytes_per_s"),
    ("peak-inf", "value = 1e14", "value = inf", "peak_flops_per_s"),
    ("peak-nan", "value = 1e14", "value = nan", "peak_flops_per_s"),
    ("peak-zero", "value = 1e14", "value = 0", "peak_flops_per_s"),
    ("cores-fraction", "value = 4,", "value = 0.5,", "cores"),
    ("cores-zero", "value = 4,", "value = 0,", "cores"),
    ("cores-huge", "value = 4,", "value = 1e30,", "cores"),
    ("source-empty", 'source = "datasheet" }\n[peak', 'source = "" }\n[peak', "cores.source"),
    ("managed-by-magic", 'managed_by = "runtime"', 'managed_by = "magic"', "managed_by"),
    ("scope-galaxy", 'scope = "card"', 'scope = "galaxy"', "scope"),
    ("device-level-missing", 'device_level = "dram"', 'device_level = "hbm"', "device_level"),
    ("dtype-unknown", "bf16 = ", "bf17 = ", "peak_flops_per_s"),
    ("unknown-field", 'vendor = "me"', 'vendor = "me"\ncolour = "red"', "colour"),
    ("name-empty", 'name = "mychip"', 'name = ""', "name"),
    ("levels-empty", "[[levels]]", "[[nothing]]", "levels"),
    ("syntax", "[peak_flops_per_s]", "[peak_flops_per_s", "not valid TOML"),
    ("instances-zero", 'scope = "card"', 'scope = "card"\ninstances = 0', "instances"),
)
INTERCONNECT = """
[interconnect]
kind = "link"
topology = "switch"
parallelism = "tensor"
links = { value = 6, source = "x" }
link_bandwidth_bytes_per_s = { value = 1e11, source = "x" }
egress_bandwidth_bytes_per_s = { value = 4e11, source = "x" }
latency_s = { value = 1e-6, source = "x" }
domain_chips = { value = 8, source = "x" }
"""


def _chip_cases() -> list[FileCase]:
    cases = []
    for tag, old, new, needle in CHIP_EDITS:
        assert old in CHIP, old
        cases.append(
            FileCase(f"chip-{tag}", "chip", "c.toml", CHIP.replace(old, new, 1).encode(), needle)
        )
    links = CHIP.replace("[peak_flops_per_s]", INTERCONNECT + "[peak_flops_per_s]")
    for tag, old, new, needle in (
        ("domain-fraction", "value = 8, source", "value = 0.2, source", "domain_chips"),
        ("links-fraction", "value = 6, source", "value = 1.5, source", "links"),
        ("latency-negative", "value = 1e-6", "value = -1e-6", "latency_s"),
        ("link-bw-inf", "value = 1e11", "value = inf", "link_bandwidth_bytes_per_s"),
        ("topology-blob", 'topology = "switch"', 'topology = "blob"', "topology"),
    ):
        cases.append(
            FileCase(f"chip-{tag}", "chip", "c.toml", links.replace(old, new, 1).encode(), needle)
        )
    cases += [
        FileCase("chip-binary", "chip", "c.toml", BINARY, "binary"),
        FileCase("chip-not-utf8", "chip", "c.toml", NOT_UTF8, "not UTF-8"),
        FileCase("chip-empty", "chip", "c.toml", b"", "field"),
        FileCase("chip-directory", "chip", "c.toml", None, "directory"),
    ]
    return cases


# ---- traces -------------------------------------------------------------------------------

TRACE_BAD: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("arrival-negative", {"arrival_s": -1}, "arrival_s"),
    ("arrival-text", {"arrival_s": "soon"}, "arrival_s"),
    ("arrival-huge", {"arrival_s": 1e300}, "arrival_s"),
    ("prompt-zero", {"prompt_len": 0}, "prompt_len"),
    ("prompt-negative", {"prompt_len": -5}, "prompt_len"),
    ("prompt-fraction", {"prompt_len": 10.5}, "prompt_len"),
    ("prompt-huge", {"prompt_len": 10**12}, "prompt_len"),
    ("prompt-text", {"prompt_len": "ten"}, "prompt_len"),
    ("output-zero", {"output_len": 0}, "output_len"),
    ("output-fraction", {"output_len": 2.5}, "output_len"),
    ("output-list", {"output_len": [2]}, "output_len"),
    ("prompt-tokens-empty", {"prompt_tokens": []}, "prompt_tokens"),
    ("prompt-tokens-text", {"prompt_tokens": ["a", "b"]}, "prompt_tokens"),
    ("prompt-tokens-negative", {"prompt_tokens": [1, -2]}, "prompt_tokens"),
    ("prefix-len-negative", {"prefix_id": 1, "prefix_len": -5}, "prefix_len"),
    ("prefix-len-over-prompt", {"prefix_id": 1, "prefix_len": 50}, "prefix_len"),
    ("priority-text", {"priority": "high"}, "priority"),
    ("priority-huge", {"priority": 10**20}, "priority"),
    ("acceptance-above-one", {"spec_acceptance": 1.5}, "spec_acceptance"),
    ("acceptance-negative", {"spec_acceptance": -0.1}, "spec_acceptance"),
)


def _trace_cases() -> list[FileCase]:
    cases = []
    for tag, change, needle in TRACE_BAD:
        row = {k: v for k, v in {**TRACE_OK, **change}.items()}
        lines = _json(TRACE_OK) + b"\n" + _json(row) + b"\n"
        cases.append(FileCase(f"trace-jsonl-{tag}", "trace", "t.jsonl", lines, needle))
    cases += [
        FileCase(
            "trace-jsonl-missing-output",
            "trace",
            "t.jsonl",
            _json({"arrival_s": 0, "prompt_len": 3}),
            "output_len",
        ),
        FileCase(
            "trace-jsonl-nan",
            "trace",
            "t.jsonl",
            b'{"arrival_s": NaN, "prompt_len": 3, "output_len": 1}',
            "NaN",
        ),
        FileCase("trace-jsonl-array", "trace", "t.jsonl", b"[1, 2, 3]\n", "JSON object"),
        FileCase("trace-jsonl-syntax", "trace", "t.jsonl", b'{"arrival_s": 0,\n', "not valid JSON"),
        FileCase("trace-jsonl-binary", "trace", "t.jsonl", BINARY, "t.jsonl:1: not UTF-8"),
        FileCase("trace-jsonl-empty", "trace", "t.jsonl", b"\n\n", "no requests"),
        FileCase("trace-directory", "trace", "t.jsonl", None, "directory"),
    ]
    header = b"arrived_at,num_prefill_tokens,num_decode_tokens\n"
    for tag, row, needle in (
        ("nan", b"nan,10,2", "arrived_at"),
        ("inf", b"inf,10,2", "arrived_at"),
        ("negative", b"-1,10,2", "arrived_at"),
        ("text", b"0,ten,2", "num_prefill_tokens"),
        ("fraction", b"0,10.5,2", "num_prefill_tokens"),
        ("zero-out", b"0,10,0", "num_decode_tokens"),
        ("extra-cell", b"0,10,2,9", "more cells"),
        ("not-utf8", b"0,\xff,2", "not UTF-8"),
    ):
        body = header + b"0,10,2\n" + row + b"\n"
        cases.append(FileCase(f"trace-csv-{tag}", "trace", "t.csv", body, needle))
        cases.append(FileCase(f"sweep-trace-{tag}", "sweep_trace", "t.csv", body, needle))
    cases += [
        FileCase("sweep-trace-header", "sweep_trace", "t.csv", b"a,b,c\n0,1,1\n", "arrival_s"),
        FileCase("sweep-trace-binary", "sweep_trace", "t.csv", BINARY, "t.csv:1: not UTF-8"),
        FileCase("sweep-trace-directory", "sweep_trace", "t.csv", None, "directory"),
    ]
    return cases


# ---- sweep specs --------------------------------------------------------------------------

SPEC_EDITS: tuple[tuple[str, str, str, str], ...] = (
    ("ttft-negative", "ttft_s = 1.0", "ttft_s = -1.0", "slo.ttft_s"),
    ("ttft-nan", "ttft_s = 1.0", "ttft_s = nan", "slo.ttft_s"),
    ("ttft-inf", "ttft_s = 1.0", "ttft_s = inf", "slo.ttft_s"),
    ("tpot-zero", "tpot_s = 0.1", "tpot_s = 0", "slo.tpot_s"),
    ("models-empty", 'models = ["llama-3.1-8b"]', "models = []", "sweep.models"),
    ("models-text", 'models = ["llama-3.1-8b"]', 'models = "llama"', "sweep.models"),
    ("seed-negative", 'name = "s"', 'name = "s"\nseed = -1', "sweep.seed"),
    ("seed-huge", 'name = "s"', 'name = "s"\nseed = 100000000000000000', "sweep.seed"),
    ("chips-zero", 'name = "s"', 'name = "s"\nchips = [0]', "sweep.chips"),
    ("objective-unknown", 'name = "s"', 'name = "s"\nobjective = "vibes"', "sweep.objective"),
    ("requests-one", "num_requests = 10", "num_requests = 1", "num_requests"),
    ("requests-huge", "num_requests = 10", "num_requests = 1000000000", "num_requests"),
    ("prompt-zero", "prompt_tokens = 100", "prompt_tokens = 0", "prompt_tokens"),
    ("arrival-unknown", 'arrival = "uniform"', 'arrival = "sometimes"', "arrival"),
    ("unknown-table", "[slo]", "[slow]\nx = 1\n[slo]", "slow"),
    ("syntax", "[slo]", "[slo", "line"),
    ("duration-inf", "num_requests = 10", "duration_s = inf", "duration_s"),
)
SEARCH = "\n[search]\nrate_min_rps = 5.0\nrate_max_rps = 1.0\n"


def _spec_cases() -> list[FileCase]:
    cases = []
    for tag, old, new, needle in SPEC_EDITS:
        assert old in SPEC, old
        text = SPEC.replace(old, new, 1).encode()
        cases.append(FileCase(f"spec-{tag}", "spec", "s.toml", text, needle))
    policy = '\n[[policies]]\nname = "p"\nblock_size = {}\n'
    extra = [
        ("rate-min-above-max", SEARCH, "rate_min_rps"),
        ("rate-max-nan", "\n[search]\nrate_max_rps = nan\n", "rate_max_rps"),
        ("probes-zero", "\n[search]\nmax_probes = 0\n", "max_probes"),
        ("block-size-zero", policy.format(0), "block_size"),
        ("block-size-negative", policy.format(-16), "block_size"),
        ("block-size-huge", policy.format(10**9), "block_size"),
        ("price-nan", "\n[prices.h100-sxm]\nusd_per_chip_hour = nan\n", "usd_per_chip_hour"),
    ]
    cases += [FileCase(f"spec-{t}", "spec", "s.toml", (SPEC + x).encode(), n) for t, x, n in extra]
    cases += [
        FileCase("spec-binary", "spec", "s.toml", BINARY, "binary"),
        FileCase("spec-not-utf8", "spec", "s.toml", NOT_UTF8, "not UTF-8"),
        FileCase("spec-directory", "spec", "s.toml", None, "directory"),
        FileCase("spec-empty", "spec", "s.toml", b"", "field sweep"),
    ]
    return cases


# ---- answer sheets ------------------------------------------------------------------------


def _sheet_cases() -> list[FileCase]:
    bad: list[tuple[str, Any, str]] = [
        ("seed-huge", {"seed": 10**30, "answers": {}}, "seed"),
        ("seed-negative", {"seed": -1, "answers": {}}, "seed"),
        ("seed-text", {"seed": "abc", "answers": {}}, "seed"),
        ("seed-float", {"seed": 1.5, "answers": {}}, "seed"),
        ("seed-bool", {"seed": True, "answers": {}}, "seed"),
        ("answers-missing", {"seed": 1}, "answers"),
        ("answers-text", {"seed": 1, "answers": "B"}, "answers"),
        ("answers-key-word", {"seed": 1, "answers": {"one": 3}}, "answers"),
        ("answers-key-zero", {"seed": 1, "answers": {"0": 3}}, "answers"),
        ("answers-key-huge", {"seed": 1, "answers": {"99999999999999999999": 3}}, "answers"),
        ("answers-key-negative", {"seed": 1, "answers": {"-2": 3}}, "answers"),
        ("answers-list-long", {"seed": 1, "answers": [1] * 2000}, "answers"),
        ("not-an-object", [1, 2], "answers"),
    ]
    cases = [FileCase(f"sheet-{t}", "sheet", "a.json", _json(d), n) for t, d, n in bad]
    cases += [
        FileCase("sheet-binary", "sheet", "a.json", BINARY, "binary"),
        FileCase("sheet-nan", "sheet", "a.json", b'{"seed": NaN, "answers": {}}', "NaN"),
        FileCase("sheet-syntax", "sheet", "a.json", b'{"seed": 1', "not valid JSON"),
        FileCase("sheet-directory", "sheet", "a.json", None, "directory"),
    ]
    return cases


def _store_cases() -> list[FileCase]:
    return [
        FileCase("store-garbage", "store", "s.db", BINARY, "not a database"),
        FileCase("store-text", "store", "s.db", b"hello\n" * 100, "not a database"),
        FileCase("lab-db-garbage", "lab_db", "l.db", BINARY, "not a ridgeline lab database"),
        FileCase("quiz-db-garbage", "quiz_db", "q.db", BINARY, "not a usable attempts database"),
    ]


FILE_CASES: list[FileCase] = (
    _config_cases()
    + _chip_cases()
    + _trace_cases()
    + _spec_cases()
    + _sheet_cases()
    + _store_cases()
)


# ---- CLI options --------------------------------------------------------------------------

CLI_BAD: tuple[tuple[str, str, str], ...] = (
    # (id, arguments, what the error line contains)
    ("hw-show-directory", "hw show {tmp}", "directory"),
    ("hw-show-missing-toml", "hw show nope.toml", "no such file"),
    ("hw-show-binary", "hw show {tmp}/bin.toml", "binary"),
    ("model-show-missing", "model show {tmp}/nothing", "no such file"),
    ("model-show-binary", "model show {tmp}/config.json", "binary"),
    ("model-show-kv-dtype", "model show --kv-dtype fp9 llama-3.1-8b", "fp9"),
    ("roofline-batch-negative", "roofline --batch -1", "batch"),
    ("roofline-batch-huge", "roofline --batch 99999999999999", "batch"),
    ("roofline-batch-1e30", "roofline --batch 1000000000000000000000000000000", "batch"),
    ("roofline-context-negative", "roofline --context -5", "context"),
    ("roofline-prompt-zero", "roofline --prompt 0", "prompt"),
    ("roofline-prompt-over-context", "roofline --phase prefill --prompt 9000", "prompt"),
    ("roofline-bw-eff-zero", "roofline --bw-eff 0", "bandwidth_efficiency"),
    ("roofline-bw-eff-two", "roofline --bw-eff 2", "bandwidth_efficiency"),
    ("roofline-compute-eff-nan", "roofline --compute-eff nan", "--compute-eff"),
    ("roofline-dtype", "roofline --weight-dtype int3", "int3"),
    ("roofline-hw", "roofline --hw nope", "unknown accelerator"),
    ("roofline-model", "roofline --model nope", "unknown model"),
    ("roofline-model-binary", "roofline --model {tmp}/config.json", "binary"),
    ("roofline-hw-binary", "roofline --hw {tmp}/bin.toml", "binary"),
    ("roofline-plot-unwritable", "roofline --plot /proc/x.png", "--plot"),
    ("roofline-plot-directory", "roofline --plot {tmp}", "--plot"),
    ("kv-batch-zero", "kv --batch 0", "batch"),
    ("kv-context-zero", "kv --context 0", "context"),
    ("kv-memory-utilization-negative", "kv --memory-utilization -0.5", "memory_utilization"),
    ("kv-memory-utilization-big", "kv --memory-utilization 1.5", "memory_utilization"),
    (
        "kv-memory-utilization-inf",
        "kv --memory-utilization inf --hw h100-sxm",
        "--memory-utilization",
    ),
    ("kv-tp-odd", "kv --hw h100-sxm --tp 3", "tensor_parallel"),
    ("kv-dtype", "kv --kv-dtype fp9", "fp9"),
    ("kv-hw-directory", "kv --hw {tmp}", "directory"),
    ("questions-batch-zero", "questions --batch 0", "batch"),
    ("questions-context-negative", "questions --context -1", "context"),
    ("questions-phase", "questions --phase sideways", "sideways"),
    ("compare-batch-zero", "compare --batch 0", "batch"),
    ("compare-prompt-zero", "compare --prompt 0", "--prompt"),
    ("compare-context-huge", "compare --context 1000000000", "context"),
    ("compare-hw", "compare --hw b200 --hw nope", "unknown accelerator"),
    ("deploy-tp-zero", "deploy --tp 0", "tensor_parallel"),
    ("deploy-pp-zero", "deploy --pp 0", "pipeline_parallel"),
    ("deploy-tp-indivisible", "deploy --tp 3", "tensor_parallel"),
    ("deploy-pp-too-many", "deploy --pp 100000", "pipeline_parallel"),
    ("deploy-batch-negative", "deploy --batch -4", "batch"),
    ("tile-m-zero", "tile --m 0", "--m"),
    ("tile-k-negative", "tile --k -1", "--k"),
    ("tile-n-huge", "tile --n 10000000000000", "--n"),
    ("tile-buffers-zero", "tile --buffers 0", "--buffers"),
    ("tile-buffers-nine", "tile --buffers 9", "--buffers"),
    ("tile-dtype", "tile --dtype q4", "q4"),
    ("flash-context-zero", "flash --context 0", "context"),
    ("flash-hw", "flash --hw nope", "unknown accelerator"),
    ("flash-hw-no-scratchpad", "flash --hw b200", "scratchpad"),
    ("schedule-bucket-batch-zero", "schedule --bucket-batch 0", "--bucket-batch"),
    ("schedule-bucket-context-zero", "schedule --bucket-context 0", "--bucket-context"),
    ("schedule-bucket-too-small", "schedule --bucket-batch 1 --batch 4", "bucket"),
    ("schedule-buffers-zero", "schedule --buffers 0", "--buffers"),
    ("schedule-bw-eff-nan", "schedule --bw-eff nan", "--bw-eff"),
    ("schedule-batch-zero", "schedule --batch 0", "batch"),
    ("schedule-hw-no-scratchpad", "schedule --hw b200", "b200"),
    ("schedule-program", "schedule --program nosuchop", "nosuchop"),
    ("schedule-timeline-unwritable", "schedule --timeline /proc/x.png", "--timeline"),
    ("orchestrate-batch-zero", "orchestrate --batch 0", "batch"),
    ("orchestrate-gpu", "orchestrate --gpu nope", "unknown accelerator"),
    ("report-hw", "report --hw nope --out {tmp}/r", "unknown accelerator"),
    ("report-out-unwritable", "report --out /proc/nope", "--out"),
    ("report-lab-missing", "report --lab {tmp}/nothing.db --out {tmp}/r2", "nothing.db"),
    ("report-sweep-missing", "report --sweep {tmp}/nothing.db --out {tmp}/r3", "nothing.db"),
    ("simulate-requests-zero", "simulate -n 0", "requests"),
    ("simulate-requests-negative", "simulate -n -5", "requests"),
    ("simulate-requests-huge", "simulate -n 99999999999999999999999", "requests"),
    ("simulate-rate-zero", "simulate --rate 0", "rate"),
    ("simulate-rate-negative", "simulate --rate -1", "rate"),
    ("simulate-rate-nan", "simulate -n 20 --rate nan", "--rate"),
    ("simulate-rate-inf", "simulate -n 20 --rate inf", "--rate"),
    ("simulate-overhead-nan", "simulate -n 20 --overhead nan", "--overhead"),
    ("simulate-cv-nan", "simulate -n 20 --cv nan", "--cv"),
    ("simulate-cv-zero", "simulate --cv 0 --workload gamma", "cv"),
    ("simulate-lognormal-sigma", "simulate --prompt lognormal:100:-1", "sigma"),
    ("simulate-zipf-a", "simulate --prompt zipf:100:0.5", "zipf_a"),
    ("simulate-fixed-zero", "simulate --prompt fixed:0", "mean"),
    ("simulate-fixed-text", "simulate --prompt fixed:abc", "DIST:MEAN"),
    ("simulate-dist-unknown", "simulate --prompt weird:100", "weird"),
    ("simulate-fixed-param", "simulate --prompt fixed:100:3", "DIST:MEAN"),
    ("simulate-output-nan", "simulate --output lognormal:nan", "mean"),
    ("simulate-prefixes-negative", "simulate --prefixes -1", "prefixes"),
    ("simulate-prefix-len-negative", "simulate --prefix-len -5", "prefix_len"),
    ("simulate-turns-zero", "simulate --turns 0", "turns"),
    ("simulate-trace-directory", "simulate --trace {tmp}", "directory"),
    ("simulate-trace-missing", "simulate --trace {tmp}/none.jsonl", "no such file"),
    ("simulate-trace-binary", "simulate --trace {tmp}/bin.jsonl", "not UTF-8"),
    ("simulate-trace-nan", "simulate --trace {tmp}/nan.csv", "arrived_at"),
    ("simulate-policy", "simulate --policy lottery", "lottery"),
    ("simulate-chunk-negative", "simulate --chunk -1", "max_num_batched_tokens"),
    ("simulate-max-seqs-zero", "simulate --max-seqs 0", "max_num_seqs"),
    ("simulate-max-model-len", "simulate --max-model-len -1", "max_model_len"),
    ("simulate-block-size-zero", "simulate --block-size 0", "block_size"),
    ("simulate-block-size-negative", "simulate --block-size -16", "block_size"),
    ("simulate-block-size-huge", "simulate --block-size 100000000", "block_size"),
    ("simulate-eviction", "simulate --eviction mru", "mru"),
    ("simulate-memory-utilization-zero", "simulate --memory-utilization 0", "memory_utilization"),
    ("simulate-memory-utilization-big", "simulate --memory-utilization 1.5", "memory_utilization"),
    ("simulate-tp-odd", "simulate --tp 3", "tensor_parallel"),
    ("simulate-efficiency-calibrated", "simulate --bw-eff 0.5", "--ideal"),
    ("simulate-spec-k-negative", "simulate --spec-k -1", "spec_k"),
    ("simulate-spec-k-huge", "simulate --spec-k 1000", "spec_k"),
    ("simulate-spec-accept", "simulate --spec-accept 2", "--spec-accept"),
    ("simulate-spec-draft", "simulate --spec-draft nope --spec-k 2", "unknown model"),
    ("simulate-tiers-text", "simulate --tiers small:x:1", "tiers"),
    ("simulate-tiers-bw-zero", "simulate --tiers small:1e9:0", "bandwidth"),
    ("simulate-tiers-negative", "simulate --tiers small:-1:1e9", "capacity_bytes"),
    ("simulate-tiers-nan", "simulate --tiers small:1e9:nan", "bandwidth"),
    ("simulate-tiers-empty", "simulate --tiers ,,,", "tiers"),
    ("simulate-disagg-zero", "simulate --disagg 0:1", "disagg"),
    ("simulate-disagg-text", "simulate --disagg x", "disagg"),
    ("simulate-link-bw-zero", "simulate --link-bw 0 --disagg 1:1", "link_bw"),
    ("simulate-link-latency", "simulate --link-latency -1 --disagg 1:1", "link_latency"),
    ("simulate-bw-eff-zero", "simulate --bw-eff 0", "bandwidth_efficiency"),
    ("simulate-overhead-negative", "simulate --overhead -1", "step_overhead_s"),
    ("simulate-slo-ttft", "simulate --slo-ttft -1", "slo_ttft"),
    ("simulate-slo-tpot", "simulate --slo-tpot 0", "slo_tpot"),
    ("simulate-seed", "simulate --seed -1", "seed"),
    ("simulate-compare-empty", "simulate compare --configs ,,,", "--configs"),
    ("simulate-compare-unknown", "simulate compare --configs nope", "nope"),
    ("simulate-plot-file", "simulate --plot /etc/passwd", "--plot"),
    (
        "quiz-seed-huge",
        "quiz start -u me --seed 1000000000000000000000000000000 "
        "--answers {tmp}/sheet.json --db {tmp}/q.db",
        "seed",
    ),
    (
        "quiz-answers-missing",
        "quiz start -u me --db {tmp}/q.db --answers {tmp}/none.json",
        "no such file",
    ),
    ("quiz-answers-directory", "quiz start -u me --answers {tmp} --db {tmp}/q.db", "directory"),
    ("quiz-answers-binary", "quiz start -u me --answers {tmp}/bin.json --db {tmp}/q.db", "binary"),
    (
        "quiz-export-seed-huge",
        "quiz export --seed 1000000000000000000000000000000 --out {tmp}/e",
        "seed",
    ),
    ("quiz-export-seed-negative", "quiz export --seed -5 --out {tmp}/e", "seed"),
    ("quiz-export-out-file", "quiz export --seed 1 --out /etc/passwd", "--out"),
    ("quiz-status-db-directory", "quiz status -u me --db {tmp}", "database"),
    ("generate-block-size-zero", "generate --block-size 0", "block_size"),
    ("generate-block-size-negative", "generate --block-size -16", "block_size"),
    ("generate-max-output-tokens-zero", "generate --max-output-tokens 0", "max_output_tokens"),
    ("generate-batch-zero", "generate --batch 0", "batch"),
    ("generate-prompt-tokens-zero", "generate --prompt-tokens 0", "prompt_tokens"),
    ("generate-prompt-huge", "generate --prompt-tokens 100000000 --batch 100000", "prompt_tokens"),
    ("generate-temperature", "generate --temperature -1", "temperature"),
    ("generate-temperature-nan", "generate --temperature nan", "--temperature"),
    ("generate-top-p", "generate --top-p 0", "top_p"),
    ("generate-top-k", "generate --top-k -1", "top_k"),
    ("generate-dtype", "generate --dtype fp8", "dtype"),
    ("generate-kv-gib-nan", "generate --kv-gib nan", "--kv-gib"),
    ("generate-kv-gib-negative", "generate --kv-gib -1", "kv_budget_bytes"),
    ("generate-threads-zero", "generate --threads 0", "threads"),
    ("generate-spec-k-huge", "generate --spec-k 1000", "num_speculative_tokens"),
    ("generate-draft-layers-negative", "generate --spec-k 2 --draft-layers -1", "draft_layers"),
    ("generate-seed", "generate --seed -1", "seed"),
    ("explore-port-zero", "explore --port 0", "--port"),
    ("explore-port-huge", "explore --port 70000", "--port"),
    ("sweep-run-missing", "sweep run {tmp}/none.toml", "no such file"),
    ("sweep-run-directory", "sweep run {tmp}", "directory"),
    ("sweep-run-binary", "sweep run {tmp}/bin.toml", "binary"),
    ("sweep-run-chips", "sweep run {tmp}/spec.toml --chips a,b", "--chips"),
    ("sweep-run-seed", "sweep run {tmp}/spec.toml --seed -1", "seed"),
    ("sweep-status-missing", "sweep status {tmp}/none.db", "no such file"),
    ("sweep-status-garbage", "sweep status {tmp}/bin.toml", "not a database"),
    ("sweep-report-missing", "sweep report {tmp}/none.db", "no such file"),
    ("lab-calibrate-sizes", "lab calibrate --sizes abc", "sizes"),
    ("lab-calibrate-repeats", "lab calibrate --repeats 0", "repeats"),
    ("lab-calibrate-matmul", "lab calibrate --matmul-n -1", "matmul"),
    ("lab-calibrate-threads", "lab calibrate --threads x", "threads"),
    ("lab-calibrate-device", "lab calibrate --device tpu", "tpu"),
    ("lab-sweep-batch", "lab sweep --batch abc", "batch"),
    ("lab-sweep-batch-zero", "lab sweep --batch 0", "batch"),
    ("lab-sweep-context", "lab sweep --context -5", "context"),
    ("lab-sweep-steps", "lab sweep --steps 0", "steps"),
    ("lab-sweep-dtype", "lab sweep --dtype fp9", "fp9"),
    ("lab-sweep-threads", "lab sweep --threads 0", "threads"),
    ("lab-sweep-backend", "lab sweep --backend hf:weird:sdpa", "weird"),
    ("lab-profile-batch", "lab profile --batch 0", "batch"),
    ("lab-profile-cache", "lab profile --cache nope", "nope"),
    ("lab-profile-steps", "lab profile --steps 0", "steps"),
    ("lab-kv-batch", "lab kv --batch 0", "batch"),
    ("lab-kv-context", "lab kv --context 0", "context"),
    ("lab-kv-decode-steps", "lab kv --decode-steps -1", "decode"),
    ("lab-kv-dtype", "lab kv --kv-dtype fp9", "fp9"),
    ("lab-compare-db", "lab compare --db {tmp}/none.db", "none.db"),
    ("lab-compare-db-garbage", "lab compare --db {tmp}/bin.toml", "lab database"),
    ("lab-compare-timer", "lab compare --timer sundial", "sundial"),
    ("lab-export-kind", "lab export --kind weird --csv {tmp}/o.csv", "weird"),
    ("lab-export-db", "lab export --db {tmp}/none.db --csv {tmp}/o.csv", "none.db"),
    ("bench-steps", "bench engine --steps 0", "steps"),
    ("bench-batch", "bench engine --batch 0", "batch"),
    ("bench-context", "bench engine --context -1", "context"),
    ("bench-bandwidth-nan", "bench engine --bandwidth-gbs nan", "--bandwidth-gbs"),
    ("bench-bandwidth-negative", "bench engine --bandwidth-gbs -1", "bandwidth_gbs"),
    ("bench-bandwidth-zero", "bench engine --bandwidth-gbs 0", "bandwidth_gbs"),
    # ridgeline serve: every option before the engine is built (compiling kernels for minutes)
    ("serve-threads-negative", "serve --threads -2", "--threads"),
    ("serve-threads-zero", "serve --threads 0", "--threads"),
    ("serve-drain-negative", "serve --drain-s -5", "--drain-s"),
    # NaN fails a range check too: the message says what is wrong with it, not the range
    ("serve-drain-nan", "serve --drain-s nan", "--drain-s: must be a finite number"),
    ("serve-drain-minus-inf", "serve --drain-s -inf", "--drain-s: must be a finite number"),
    ("serve-drain-inf", "serve --drain-s inf", "--drain-s"),
    ("serve-max-waiting-negative", "serve --max-waiting -1", "--max-waiting"),
    ("serve-kv-gib-negative", "serve --kv-gib -1", "kv_budget_bytes"),
    ("serve-kv-gib-zero", "serve --kv-gib 0", "kv_budget_bytes"),
    ("serve-kv-gib-tiny", "serve --kv-gib 1e-9", "holds no block"),
    ("serve-block-size-past-pool", "serve --kv-gib 0.001 --block-size 4096", "holds no block"),
    ("serve-kernels", "serve --kernels fast", "kernels"),
    ("serve-seed-negative", "serve --seed -1", "seed"),
    ("serve-port-zero", "serve --port 0", "--port"),
    ("serve-port-huge", "serve --port 70000", "--port"),
    ("serve-block-size-huge", "serve --block-size 100000000", "block_size"),
    (
        "serve-max-num-batched-tokens-zero",
        "serve --max-num-batched-tokens 0",
        "--max-num-batched-tokens",
    ),
    ("serve-max-body-zero", "serve --max-body-mib 0", "--max-body-mib"),
    ("serve-max-body-huge", "serve --max-body-mib 100000", "--max-body-mib"),
    ("serve-model-missing", "serve --model {tmp}/none.json", "no such file"),
    ("serve-model-binary", "serve --model {tmp}/config.json", "binary"),
    ("serve-tokenizer-missing", "serve --tokenizer {tmp}/nothing", "--tokenizer"),
    ("serve-weights-file", "serve --weights {tmp}/bin.json", "--weights"),
    # lab serve-check: before the calibration compiles and runs
    ("serve-check-rates-nan", "lab serve-check --out {tmp}/sc --rates nan", "rates"),
    ("serve-check-rates-negative", "lab serve-check --out {tmp}/sc --rates -1", "rates"),
    ("serve-check-rates-zero", "lab serve-check --out {tmp}/sc --rates 0", "rates"),
    ("serve-check-rates-inf", "lab serve-check --out {tmp}/sc --rates 1,inf", "rates"),
    ("serve-check-rates-huge", "lab serve-check --out {tmp}/sc --rates 1e300", "rates"),
    ("serve-check-rates-text", "lab serve-check --out {tmp}/sc --rates 1,fast", "--rates"),
    ("serve-check-rates-empty", "lab serve-check --out {tmp}/sc --rates ,", "--rates"),
    (
        "serve-check-prompt-too-long",
        "lab serve-check --out {tmp}/sc --prompt-tokens 5000",
        "prompt_tokens",
    ),
    (
        "serve-check-output-too-long",
        "lab serve-check --out {tmp}/sc --output-tokens 2000",
        "output_tokens",
    ),
    (
        "serve-check-requests-one",
        "lab serve-check --out {tmp}/sc --num-requests 1",
        "--num-requests",
    ),
    (
        "serve-check-requests-huge",
        "lab serve-check --out {tmp}/sc --num-requests 100000000",
        "--num-requests",
    ),
    ("serve-check-seqs-zero", "lab serve-check --out {tmp}/sc --max-num-seqs 0", "--max-num-seqs"),
    ("serve-check-port-zero", "lab serve-check --out {tmp}/sc --port 0", "--port"),
    ("serve-check-out-file", "lab serve-check --out {tmp}/bin.json", "--out"),
    # conflicting and ignored options
    ("predict-batch-and-rate", "predict --batch 4 --rate 2", "rate"),
    ("predict-rate-huge", "predict --rate 1e300", "rate"),
    ("predict-rate-negative", "predict --rate -1", "rate"),
    ("generate-draft-layers-alone", "generate --draft-layers 2", "--spec-k"),
    ("generate-draft-layers-negative-alone", "generate --draft-layers -1", "draft_layers"),
    ("simulate-link-bw-negative-alone", "simulate --link-bw -1", "link_bw"),
    ("simulate-link-latency-negative-alone", "simulate --link-latency -1", "link_latency"),
    ("simulate-link-bw-inf-alone", "simulate --link-bw inf", "--link-bw"),
    ("simulate-prefill-chunk-zero", "simulate --prefill-chunk 0", "prefill_chunk"),
    ("simulate-compile-s-zero", "simulate --compile-s 0", "compile_s"),
    ("simulate-compile-budget-negative", "simulate --compile-budget -1", "compile_budget"),
    ("simulate-trace-with-bad-rate", "simulate --trace {tmp}/ok.csv --rate -1", "rate"),
    ("simulate-trace-with-bad-cv", "simulate --trace {tmp}/ok.csv --cv -1", "cv"),
    ("simulate-trace-with-bad-prompt", "simulate --trace {tmp}/ok.csv --prompt fixed:0", "mean"),
    # layout: whole bytes, no negative sizes
    ("layout-granule-fraction", "layout --granule 0.3", "granule"),
    ("layout-granule-zero", "layout --granule 0", "granule"),
    ("layout-granule-not-whole", "layout --granule 1.5", "granule"),
    ("layout-granule-huge", "layout --granule 1e300", "granule"),
    ("layout-cache-negative", "layout --cache -1", "cache"),
    ("layout-cache-fraction", "layout --cache 0.5", "cache"),
    ("layout-stride-zero", "layout --stride 0", "stride"),
    ("layout-stride-negative", "layout --stride -3", "stride"),
    ("layout-offset-fraction", "layout --offset 0.5", "offset"),
    ("layout-offset-negative", "layout --offset -1", "offset"),
    ("layout-size-fraction", "layout --size 0.5", "size"),
    ("layout-size-zero", "layout --size 0", "size"),
    ("layout-elem-fraction", "layout --elem 0.3", "elem_bytes"),
    ("layout-rows-zero", "layout --rows 0", "rows"),
    ("layout-cols-negative", "layout --cols -4", "cols"),
    # the kernel build's lock wait
    (
        "engine-build-lock-timeout-negative",
        "engine build --root {tmp}/k --lock-timeout-s -1",
        "--lock-timeout-s",
    ),
    (
        "engine-build-lock-timeout-nan",
        "engine build --root {tmp}/k --lock-timeout-s nan",
        "--lock-timeout-s: must be a finite number",
    ),
    ("engine-build-target", "engine build --root {tmp}/k --target fast", "fast"),
)
CLI_ENV_BAD: tuple[tuple[str, str, dict[str, str], str], ...] = (
    # (id, arguments, environment, what the error line contains): variables checked as flags
    (
        "env-lock-timeout-nan",
        "engine build --root {tmp}/k",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "nan"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-lock-timeout-negative",
        "engine build --root {tmp}/k",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "-1"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-lock-timeout-inf",
        "engine build --root {tmp}/k",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "inf"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-lock-timeout-text",
        "engine build --root {tmp}/k",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "soon"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-lock-timeout-serve",
        "serve",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "nan"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-lock-timeout-serve-check",
        "lab serve-check --out {tmp}/sc",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "nan"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    ("env-api-key-empty", "serve", {"RIDGELINE_API_KEY": ""}, "RIDGELINE_API_KEY"),
    ("env-api-key-space", "serve", {"RIDGELINE_API_KEY": "two words"}, "RIDGELINE_API_KEY"),
    ("env-api-key-control", "serve", {"RIDGELINE_API_KEY": "key\x07"}, "RIDGELINE_API_KEY"),
    (
        "env-kernel-dir-file",
        "engine build",
        {"RIDGELINE_KERNEL_DIR": "{tmp}/bin.json"},
        "RIDGELINE_KERNEL_DIR",
    ),
    (
        "env-kernel-dir-file-serve",
        "serve",
        {"RIDGELINE_KERNEL_DIR": "{tmp}/bin.json"},
        "RIDGELINE_KERNEL_DIR",
    ),
    (
        "env-kernel-dir-file-serve-check",
        "lab serve-check --out {tmp}/sc",
        {"RIDGELINE_KERNEL_DIR": "{tmp}/bin.json"},
        "RIDGELINE_KERNEL_DIR",
    ),
    (
        "env-lock-timeout-calibrate",
        "lab calibrate",
        {"RIDGELINE_KERNEL_LOCK_TIMEOUT_S": "nan"},
        "RIDGELINE_KERNEL_LOCK_TIMEOUT_S",
    ),
    (
        "env-kernel-dir-file-calibrate",
        "lab calibrate",
        {"RIDGELINE_KERNEL_DIR": "{tmp}/bin.json"},
        "RIDGELINE_KERNEL_DIR",
    ),
    (
        "env-quiz-home-file",
        "quiz status -u me",
        {"RIDGELINE_QUIZ_HOME": "{tmp}/bin.json"},
        "RIDGELINE_QUIZ_HOME",
    ),
    (
        "env-hw-dir-file",
        "roofline --hw mychip",
        {"RIDGELINE_HW_DIR": "{tmp}/bin.toml"},
        "RIDGELINE_HW_DIR",
    ),
)
CLI_FILES: dict[str, bytes] = {
    "bin.toml": BINARY,
    "bin.json": BINARY,
    "bin.jsonl": BINARY,
    "config.json": BINARY,
    "nan.csv": b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\nnan,10,2\n",
    "sheet.json": _json({"answers": {}}),
    "spec.toml": SPEC.encode(),
    "d.json": _json(GPT2),
    "ok.csv": b"arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n0.5,12,3\n",
}
CLI_CASES = [CliCase(i, tuple(a.split()), n, CLI_FILES) for i, a, n in CLI_BAD]
CLI_CASES += [CliCase(i, tuple(a.split()), n, CLI_FILES, env) for i, a, env, n in CLI_ENV_BAD]

# ---- API bodies ---------------------------------------------------------------------------

HUGE = {**LLAMA, "num_hidden_layers": 1_000_000}
BIG = {
    **LLAMA,
    "num_hidden_layers": 1000,
    "hidden_size": 131072,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
    "intermediate_size": 500_000,
}
ANALYTIC = ("roofline", "kv", "questions", "compare", "schedule", "flash")
EXPENSIVE = ("compare", "schedule")  # their work grows with the model past the explorer's budget
API_BAD_BODIES: tuple[tuple[str, dict[str, Any], int, str], ...] = (
    ("unknown-field", {"colour": "red"}, 422, "colour"),
    ("model-unknown", {"model": "nope"}, 422, "model"),
    ("model-path", {"model": "/etc/passwd"}, 422, "model"),
    ("config-empty", {"config": {}}, 422, "config"),
    ("config-head-dim-text", {"config": {**LLAMA, "head_dim": "abc"}}, 422, "config"),
    ("config-head-dim-negative", {"config": {**LLAMA, "head_dim": -128}}, 422, "config"),
    ("config-layers-huge", {"config": HUGE}, 422, "config"),
    ("config-too-big", {"config": BIG}, 422, "config"),
    ("config-list", {"config": [1, 2]}, 422, "config"),
    ("config-name-empty", {"config": LLAMA, "config_name": ""}, 422, "config_name"),
)
API_BAD_FIELDS: dict[str, tuple[tuple[str, Any, str], ...]] = {
    "roofline": (
        ("batch", 0, "batch"),
        ("batch", 10**12, "batch"),
        ("context", -1, "context"),
        ("prompt", 0, "prompt"),
        ("accelerator", "nope", "accelerator"),
        ("act_dtype", "fp9", "act_dtype"),
        ("act_dtype", 8, "act_dtype"),
        ("batch", "many", "batch"),
    ),
    "kv": (
        ("memory_utilization", 1.5, "memory_utilization"),
        ("memory_utilization", 0, "memory_utilization"),
        ("context", 0, "context"),
        ("kv_dtype", "fp9", "kv_dtype"),
        ("tensor_parallel", 0, "tensor_parallel"),
        ("tensor_parallel", 3, "tensor_parallel"),
    ),
    "questions": (("batch", 0, "batch"), ("context", 10**9, "context")),
    "compare": (
        ("accelerators", [], "accelerators"),
        ("accelerators", ["x"], "accelerators"),
        ("accelerators", ["h100-sxm"] * 9, "accelerators"),
        ("batch", -1, "batch"),
    ),
    "schedule": (
        ("batch", 0, "batch"),
        ("buffers", 9, "buffers"),
        ("phase", "both", "phase"),
        ("context", 10**9, "context"),
        ("accelerator", "b200", "accelerator"),
    ),
    "flash": (
        ("context", 0, "context"),
        ("accelerators", ["nope"], "accelerators"),
        ("accelerators", "h100-sxm", "accelerators"),
    ),
    "simulate": (
        ("num_requests", 0, "num_requests"),
        ("num_requests", 50_000, "num_requests"),
        ("rate_per_s", 0, "rate_per_s"),
        ("prompt_len", 0, "prompt_len"),
        ("output_len", 10**6, "output_len"),
        ("seed", -1, "seed"),
        ("accelerator", "nope", "accelerator"),
        ("mode", "cheap", "mode"),
        ("tensor_parallel", 3, "tensor_parallel"),
        ("arrival", "gamma", "arrival"),
    ),
    "models/parse": (("config", 3, "config"), ("config", "llama", "config")),
}
NAN_FIELDS = {"kv": "memory_utilization", "simulate": "rate_per_s"}


def _api_cases() -> list[ApiCase]:
    cases = []
    for ep in (*ANALYTIC, "models/parse"):
        for tag, body, status, needle in API_BAD_BODIES:
            if tag == "config-too-big" and ep not in EXPENSIVE:
                continue  # cheap there: a model this big is a result (test_big_config_answers)
            cases.append(ApiCase(f"api-{ep}-{tag}", "POST", f"/api/{ep}", status, needle, body))
    for ep, fields in API_BAD_FIELDS.items():
        for name, value, needle in fields:
            tag = f"{name}-{json.dumps(value)[:20]}"
            cases.append(
                ApiCase(f"api-{ep}-{tag}", "POST", f"/api/{ep}", 422, needle, {name: value})
            )
    for ep, name in NAN_FIELDS.items():
        for literal in (b"NaN", b"Infinity", b"-Infinity"):
            raw = b'{"' + name.encode() + b'": ' + literal + b"}"
            cases.append(
                ApiCase(f"api-{ep}-{literal.decode()}", "POST", f"/api/{ep}", 422, name, raw=raw)
            )
    cases += [
        ApiCase("api-kv-not-json", "POST", "/api/kv", 422, "body", raw=b"{not json"),
        ApiCase("api-kv-binary", "POST", "/api/kv", 422, "body", raw=BINARY),
        ApiCase("api-kv-array", "POST", "/api/kv", 422, "body", raw=b"[1, 2]"),
        ApiCase(
            "api-kv-huge-body",
            "POST",
            "/api/kv",
            413,
            "larger than the explorer reads",
            raw=b'{"config": {"model_type": "llama", "x": "' + b"a" * (2 << 20) + b'"}}',
        ),
        ApiCase("api-accelerator-unknown", "GET", "/api/accelerators/h1000", 422, "name"),
        ApiCase("api-model-unknown", "GET", "/api/models/lama", 422, "name"),
        ApiCase("api-simulate-unknown-job", "GET", "/api/simulate/feedface", 404, "job_id"),
        ApiCase(
            "api-simulate-no-room",
            "POST",
            "/api/simulate",
            422,
            "accelerator",
            {"model": "llama-3.1-70b", "accelerator": "groq-lpu"},
        ),
        ApiCase(
            "api-simulate-tokens",
            "POST",
            "/api/simulate",
            422,
            "tokens",
            {"num_requests": 1000, "prompt_len": 30_000},
        ),
    ]
    return cases


API_CASES = _api_cases()


# ---- the server's bodies (ridgeline serve) ------------------------------------------------


@dataclass(frozen=True)
class ServeCase:
    """A request to ``ridgeline serve``: a JSON ``body`` or ``raw`` bytes; ``keyed`` sends it
    to a server that wants an API key. ``param`` is the OpenAI error's field (None: none)."""

    id: str
    path: str
    status: int
    param: str | None
    needle: str
    body: Any = None
    raw: bytes | None = None
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    keyed: bool = False


SERVE_KEY = "sk-corpus-key"
P = [1, 2, 3]  # a prompt of token ids
SERVE_FIELDS: tuple[tuple[str, dict[str, Any], str], ...] = (
    # (tag, what the body adds to a valid one, the field named)
    ("max-tokens-string", {"max_tokens": "5"}, "max_tokens"),
    ("max-tokens-true", {"max_tokens": True}, "max_tokens"),
    ("max-tokens-float", {"max_tokens": 5.0}, "max_tokens"),
    ("max-tokens-zero", {"max_tokens": 0}, "max_tokens"),
    ("max-tokens-negative", {"max_tokens": -3}, "max_tokens"),
    ("max-tokens-huge", {"max_tokens": 10**30}, "max_tokens"),
    ("max-tokens-list", {"max_tokens": [5]}, "max_tokens"),
    ("max-completion-tokens-string", {"max_completion_tokens": "5"}, "max_completion_tokens"),
    ("stream-yes", {"stream": "yes"}, "stream"),
    ("stream-one", {"stream": 1}, "stream"),
    (
        "stream-options-usage-yes",
        {"stream": True, "stream_options": {"include_usage": "yes"}},
        "stream_options",
    ),
    ("stream-options-list", {"stream_options": [True]}, "stream_options"),
    ("temperature-string", {"temperature": "0.5"}, "temperature"),
    ("temperature-true", {"temperature": True}, "temperature"),
    ("temperature-negative", {"temperature": -1}, "temperature"),
    ("temperature-huge", {"temperature": 1e9}, "temperature"),
    ("top-p-zero", {"top_p": 0}, "top_p"),
    ("top-p-string", {"top_p": "0.9"}, "top_p"),
    ("top-k-true", {"top_k": True}, "top_k"),
    ("top-k-negative", {"top_k": -2}, "top_k"),
    ("seed-negative", {"seed": -1}, "seed"),
    ("seed-huge", {"seed": 10**40}, "seed"),
    ("seed-string", {"seed": "7"}, "seed"),
    ("n-two", {"n": 2}, "n"),
    ("n-string", {"n": "1"}, "n"),
    ("ignore-eos-string", {"ignore_eos": "no"}, "ignore_eos"),
    ("echo", {"echo": True}, "echo"),
    ("logprobs", {"logprobs": 5}, "logprobs"),
    ("stop", {"stop": ["x"]}, "stop"),
    ("stop-number", {"stop": 5}, "stop"),
    ("model-number", {"model": 5}, "model"),
    # OpenAI's fields the engine cannot honour: refused unless neutral, and typed strictly
    ("presence-penalty", {"presence_penalty": 1.0}, "presence_penalty"),
    ("presence-penalty-string", {"presence_penalty": "0"}, "presence_penalty"),
    ("presence-penalty-huge", {"presence_penalty": 1e9}, "presence_penalty"),
    ("frequency-penalty-text", {"frequency_penalty": "x"}, "frequency_penalty"),
    ("repetition-penalty-zero", {"repetition_penalty": 0}, "repetition_penalty"),
    ("repetition-penalty", {"repetition_penalty": 1.2}, "repetition_penalty"),
    ("logit-bias", {"logit_bias": {"1": 100}}, "logit_bias"),
    ("logit-bias-list", {"logit_bias": [1]}, "logit_bias"),
    ("best-of", {"best_of": 3}, "best_of"),
    ("best-of-true", {"best_of": True}, "best_of"),
    ("suffix", {"suffix": "and then"}, "suffix"),
    ("suffix-number", {"suffix": 5}, "suffix"),
    ("user-number", {"user": 5}, "user"),
    ("min-p", {"min_p": 0.1}, "min_p"),
    ("min-tokens-string", {"min_tokens": "3"}, "min_tokens"),
    ("min-tokens", {"min_tokens": 3}, "min_tokens"),
    ("prompt-bools", {"prompt": [True, 1]}, "prompt"),
    ("prompt-floats", {"prompt": [1.5]}, "prompt"),
    ("prompt-deep", {"prompt": [[[1]]]}, "prompt"),
    ("prompt-empty-list", {"prompt": []}, "prompt"),
    ("prompt-empty-text", {"prompt": ""}, "prompt"),
    ("prompt-object", {"prompt": {"text": "hi"}}, "prompt"),
    ("prompt-two", {"prompt": [[1], [2]]}, "prompt"),
    ("prompt-id-negative", {"prompt": [-1]}, "prompt"),
    ("prompt-id-outside", {"prompt": [10**30]}, "prompt"),
    ("prompt-too-long", {"prompt": [1] * 600}, "prompt"),
    ("prompt-plus-output-too-long", {"max_tokens": 100_000}, "max_tokens"),
    ("prompt-text-too-long", {"prompt": "decode " * 2000}, "prompt"),
    ("prompt-text-far-too-long", {"prompt": "a" * 100_000}, "prompt"),
)
SERVE_CHAT: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("messages-empty", {"messages": []}, "messages"),
    ("messages-null", {"messages": None}, "messages"),
    ("messages-text", {"messages": "hello"}, "messages"),
    ("content-number", {"messages": [{"role": "user", "content": 5}]}, "messages"),
    ("content-parts", {"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages"),
    ("role-wizard", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
    ("role-missing", {"messages": [{"content": "hi"}]}, "messages"),
    ("max-tokens-string", {"max_tokens": "5"}, "max_tokens"),
    ("stream-yes", {"stream": "yes"}, "stream"),
    ("top-logprobs", {"top_logprobs": 5}, "top_logprobs"),
    ("logprobs-true", {"logprobs": True}, "logprobs"),
    ("tools", {"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ("tools-object", {"tools": {"type": "function"}}, "tools"),
    ("tool-choice-required", {"tool_choice": "required"}, "tool_choice"),
    ("tool-choice-number", {"tool_choice": 5}, "tool_choice"),
    ("response-format-json", {"response_format": {"type": "json_object"}}, "response_format"),
    ("response-format-text", {"response_format": "json"}, "response_format"),
    ("presence-penalty", {"presence_penalty": -1.0}, "presence_penalty"),
    ("too-long", {"messages": [{"role": "user", "content": "decode " * 2000}]}, "messages"),
    ("far-too-long", {"messages": [{"role": "user", "content": "a" * 100_000}]}, "messages"),
)
CHAT_OK = {"messages": [{"role": "user", "content": "hi"}]}
HUGE_BODY = b'{"prompt": "' + b"a" * (4 * 2**20) + b'"}'  # past the default 4 MiB


def _serve_cases() -> list[ServeCase]:
    comp, chat = "/v1/completions", "/v1/chat/completions"
    cases = [
        ServeCase(f"serve-{tag}", comp, 400, name, f"field {name}", {"prompt": P, **change})
        for tag, change, name in SERVE_FIELDS
    ]
    cases += [
        ServeCase(f"serve-chat-{tag}", chat, 400, name, f"field {name}", {**CHAT_OK, **change})
        for tag, change, name in SERVE_CHAT
    ]
    raw: list[tuple[str, str, bytes, int, str]] = [
        ("malformed", comp, b'{"prompt": [1,', 400, "not valid JSON"),
        ("empty", comp, b"", 400, "not valid JSON"),
        ("array", comp, b"[1, 2]", 400, "expected a JSON object"),
        ("string", comp, b'"prompt"', 400, "expected a JSON object"),
        ("deep", comp, b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "JSON"),
        (
            "deep-ignored-field",
            comp,
            b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b', "prompt": [1]}',
            400,
            "JSON",
        ),
        ("not-utf8", comp, b'{"prompt": "\xff\xfe"}', 400, "not UTF-8"),
        ("binary", comp, BINARY, 400, "not UTF-8"),
        ("nul", comp, b'{"prompt": [1]}\x00', 400, "not valid JSON"),
        ("lone-surrogate", comp, b'{"prompt": "ab\\ud800cd"}', 400, "surrogate"),
        ("lone-low-surrogate", comp, b'{"prompt": "ab\\udc00cd"}', 400, "surrogate"),
        (
            "chat-lone-surrogate",
            chat,
            b'{"messages": [{"role": "user", "content": "ab\\ud800cd"}]}',
            400,
            "surrogate",
        ),
        ("temperature-nan", comp, b'{"prompt": [1], "temperature": NaN}', 400, "finite"),
        ("temperature-infinity", comp, b'{"prompt": [1], "temperature": Infinity}', 400, "finite"),
        ("max-tokens-1e999", comp, b'{"prompt": [1], "max_tokens": 1e999}', 400, "max_tokens"),
        (
            "max-tokens-5000-digits",
            comp,
            b'{"prompt": [1], "max_tokens": ' + b"9" * 5000 + b"}",
            400,
            "not valid JSON",
        ),
        ("too-large", comp, HUGE_BODY, 413, "larger than this server reads"),
    ]
    for tag, path, body, status, needle in raw:
        param = {
            "temperature-nan": "temperature",
            "temperature-infinity": "temperature",
            "max-tokens-1e999": "max_tokens",
        }.get(tag)
        cases.append(ServeCase(f"serve-raw-{tag}", path, status, param, needle, raw=body))
    cases += [
        ServeCase(
            "serve-chat-messages-missing",
            chat,
            400,
            "messages",
            "field messages",
            {"max_tokens": 3},
        ),
        ServeCase(
            "serve-model-other", comp, 404, "model", "field model", {"prompt": P, "model": "gpt-9"}
        ),
        ServeCase(
            "serve-model-path",
            comp,
            404,
            "model",
            "field model",
            {"prompt": P, "model": "/etc/passwd"},
        ),
        ServeCase("serve-route-unknown", "/v1/nothing", 404, None, "no such route", {"prompt": P}),
        ServeCase("serve-route-docs", "/docs", 404, None, "no such route", method="GET"),
        ServeCase("serve-route-slash", comp + "/", 404, None, "no such route", {"prompt": P}),
        ServeCase("serve-route-health-slash", "/health/", 404, None, "no such route", method="GET"),
        ServeCase("serve-route-openapi", "/openapi.json", 404, None, "no such route", method="GET"),
        ServeCase("serve-method-get", comp, 405, None, "method not allowed", method="GET"),
        ServeCase("serve-method-put", "/health", 405, None, "method not allowed", method="PUT"),
        ServeCase("serve-key-missing", comp, 401, None, "no API key", {"prompt": P}, keyed=True),
        ServeCase(
            "serve-key-wrong",
            comp,
            401,
            None,
            "incorrect API key",
            {"prompt": P},
            headers={"Authorization": "Bearer sk-wrong"},
            keyed=True,
        ),
        ServeCase(
            "serve-key-basic",
            comp,
            401,
            None,
            "incorrect API key",
            {"prompt": P},
            headers={"Authorization": f"Basic {SERVE_KEY}"},
            keyed=True,
        ),
        ServeCase(
            "serve-key-bare",
            "/v1/models",
            401,
            None,
            "incorrect API key",
            method="GET",
            headers={"Authorization": SERVE_KEY},
            keyed=True,
        ),
        ServeCase(
            "serve-key-metrics", "/metrics", 401, None, "no API key", method="GET", keyed=True
        ),
        ServeCase(
            "serve-key-unknown-route",
            "/v1/nothing",
            401,
            None,
            "no API key",
            method="GET",
            keyed=True,
        ),
    ]
    return cases


SERVE_CASES = _serve_cases()
