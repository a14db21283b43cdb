"""Prefill/decode disaggregation: separate instances, the KV shipped over a link in between.

A prefill instance runs a request's prompt and samples its first token, then hands the request
to a decode instance; the prompt's KV crosses the link (latency + bytes ÷ bandwidth) before the
decode instance can admit it, with the prompt counted as externally computed tokens (vLLM's
NIXL connector: ``do_remote_decode`` / ``do_remote_prefill``, vllm/distributed/kv_transfer;
DistServe, OSDI 2024; Splitwise, ISCA 2024)::

    prefill instance:  [prompt ......][tok0] --KV over link-->  decode instance: [tok1][tok2]...
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.errors import ConfigError
from ridgeline.serving.request import Request, SamplingParams
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import MAX_BYTES_PER_S, MAX_SECONDS

MAX_INSTANCES = 1_024  # prefill or decode instances of one simulated deployment


@dataclass(frozen=True, slots=True)
class Disagg:
    """Instance counts and the KV link between prefill and decode instances."""

    num_prefill: int = 1
    num_decode: int = 1
    link_bandwidth_bytes_per_s: float = 50e9
    link_latency_s: float = 1e-3

    def __post_init__(self) -> None:
        if self.num_prefill < 1 or self.num_decode < 1:
            raise ConfigError("field disagg: needs at least one prefill and one decode instance")
        check_int("disagg", max(self.num_prefill, self.num_decode), 1, MAX_INSTANCES)
        check_real("link_bw", self.link_bandwidth_bytes_per_s, 0, MAX_BYTES_PER_S, low_open=True)
        check_real("link_latency", self.link_latency_s, 0, MAX_SECONDS)

    def transfer_s(self, num_tokens: int, kv_bytes_per_token: float) -> float:
        """Time to ship ``num_tokens`` tokens of KV over the link."""
        return (
            self.link_latency_s + num_tokens * kv_bytes_per_token / self.link_bandwidth_bytes_per_s
        )


def prefill_request(request: Request) -> Request:
    """The prefill instance's copy of ``request``: its prompt and one output token."""
    p = request.params
    params = SamplingParams(1, p.eos_token_id, p.priority, p.spec_acceptance)
    return Request(request.request_id, request.prompt_token_ids, params, request.arrival_s)


def decode_request(original: Request, prefilled: Request) -> Request:
    """The decode instance's request: the prompt's KV arrives from the prefill instance."""
    req = Request(
        original.request_id, original.prompt_token_ids, original.params, original.arrival_s
    )
    req.output_token_ids.extend(prefilled.output_token_ids)
    req.num_external_tokens = original.num_prompt_tokens
    return req
