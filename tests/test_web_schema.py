"""A property-based run of the explorer's API from its own OpenAPI schema (schemathesis): no
input it generates gets a 500, and every response matches the schema it publishes.

Bounded on purpose (a few examples per operation) so it runs in seconds on a shared machine.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("fastapi", reason="the explorer needs the 'web' extra")
schemathesis = pytest.importorskip("schemathesis", reason="needs the 'web-test' extra")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from ridgeline.web.app import create_app  # noqa: E402

# Simulation jobs it starts are cut at 2 s so none outlives the run for long.
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(sim_time_limit_s=2.0))

# A few per operation in `make test`; RIDGELINE_FUZZ_EXAMPLES=50 for a deeper run by hand.
EXAMPLES = int(os.environ.get("RIDGELINE_FUZZ_EXAMPLES", "6"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_from_its_schema(case: schemathesis.Case) -> None:
    # NOTE: schemathesis gives each call 10 s by default; a loaded 2-core machine once took
    # longer over a compile, which is slowness, not a failure of the API.
    case.call_and_validate(checks=CHECKS, timeout=120)
