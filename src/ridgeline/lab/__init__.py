"""lab: measure real decode on this machine and hold the analytic model to it.

``calibrate`` measures the machine (bandwidth, matmul peaks) and writes it as an accelerator spec;
``sweep`` times decode steps over batch × context with transformers (and the engine, when it
exists); ``profile`` runs torch.profiler with memory tracking; ``kvlab`` confirms the KV formula on
real cache tensors; ``compare`` fits and explains the gap between prediction and measurement;
``store`` keeps every result in SQLite.

Layer rule: may import ``errors``, ``specs``, ``analytic``, ``serving``, ``sim`` and ``engine``;
``lab`` (with ``engine``) is the only layer that imports torch or transformers, and only in the
modules that measure (``calibrate``, ``hf``, ``decode``, ``profile``, ``kvlab``, ``sweep``).
``store``, ``env``, ``memstat`` and ``compare`` stay torch-free so the report can read a results
database without torch installed.
"""
