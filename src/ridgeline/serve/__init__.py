"""serve: the engine behind an OpenAI-compatible HTTP API (``ridgeline serve``).

A face over ``engine``, as ``web`` is over ``analytic`` and ``sim``: it owns no scheduling
logic. ``engine_loop`` runs the ``LLM`` on one thread (the same ``serving`` step loop as
``LLM.generate``); ``app`` is the FastAPI routes, ``protocol`` the OpenAI request and response
shapes (read strictly), ``errors`` OpenAI's error object on every path, ``guard`` the API key
and the body limit, ``text`` tokenization and streamed detokenization, ``metrics`` the
Prometheus gauges and histograms, ``server`` the settings checked, uvicorn and the drain on
Ctrl-C or SIGTERM.

Layer rule: imports ``errors``, ``processes``, ``specs``, ``serving`` and ``engine`` (so it needs
the torch extra) plus fastapi, uvicorn and prometheus_client (the ``serve`` extra); never torch
itself.
Only ``cli`` imports it, lazily.
"""
