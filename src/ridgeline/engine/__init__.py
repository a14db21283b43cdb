"""engine: a small paged-KV inference engine on PyTorch that the ``serving`` scheduler drives.

One file per concept (the nano-vllm split):

- ``rope``: rotary position tables (Su et al. 2021), incl. Llama-3 frequency scaling.
- ``model``: GPT-2 and Llama-family decoders written directly in torch, built from a ``ModelSpec``.
- ``weights``: seeded random weights, and the Hugging Face safetensors name mapping.
- ``kv_cache``: per-layer preallocated ``[num_blocks, block_size, kv_heads, head_dim]`` K and V.
- ``huge_pages``: tensors on transparent huge pages for the buffers a step streams.
- ``attention``: per-step metadata (slot mapping, block tables) and paged attention for mixed
  batches of prefill chunks and decode tokens.
- ``sampling``: greedy, temperature, top-k, top-p, seeded per request.
- ``spec_decode``: a draft model proposes, the target verifies exactly (Leviathan et al. 2023).
- ``executor``: ``TorchExecutor``, the ``serving.Executor`` that runs a forward pass.
- ``paged_kernel``, ``panel_gemm``, ``fused_ops``: the compiled CPU kernels (attention over
  blocks in place, GEMMs on weights in column panels, fused norms and activations);
  ``fused_layer`` runs a decode-step layer on them in one call.

Layer rule: imports ``specs``, ``analytic``, ``serving`` and ``errors``, and torch; nothing but
``lab``, ``cli`` and ``report`` imports ``engine``, and those import it lazily so the CLI starts
without torch.
"""
