"""Which device a lab command may run on."""

from __future__ import annotations

import torch

from ridgeline.errors import ConfigError


def check_device(device: str) -> None:
    """Accept ``cpu``, or ``cuda``/``cuda:N`` when torch sees a CUDA device.

    Raises:
        ConfigError: naming ``--device``.
    """
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError("field --device: cuda requested but torch sees no CUDA device")
    elif device != "cpu":
        raise ConfigError(f"field --device: '{device}' is not cpu or cuda")
