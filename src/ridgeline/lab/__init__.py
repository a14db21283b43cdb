"""lab: measure real decode on this machine and hold the analytic model to it.

Modules, measuring (torch):
- ``calibrate``: bandwidth (read/copy/triad by size and threads), matmul peaks, decode GEMMs;
- ``hf`` / ``decode``: transformers models from a config, and one point's timing, memory and
  profile phases; ``engine_backend``: the same phases on ``ridgeline.engine``;
- ``sweep``: batch × context × backend, resumable through the store;
- ``profile``: torch.profiler summaries, the peak and its parts, Chrome traces;
- ``kvlab``: the KV formula against cache tensors and freed memory, MHA/GQA/MQA;
- ``device``: which device a command may use.

Modules, torch-free (the report reads a database with them, without torch):
- ``store``: the SQLite results store; ``env``: the environment of a measurement;
- ``points``: what defines a decode point; ``configs``: model configs for the lab;
- ``machine``: the calibration as data and as an accelerator catalog file (``--hw measured``);
- ``compare``: predicted vs measured, the fitted model, the gap by cause;
- ``scratchpad``: tokens of KV per scratchpad, bytes moved per step; ``memstat``: /proc, mallinfo.

Layer rule: may import ``errors``, ``specs``, ``analytic``, ``serving``, ``sim`` and ``engine``;
``lab`` and ``engine`` are the only layers that import torch or transformers, and the CLI imports
the measuring modules only inside the commands that run them.
"""
