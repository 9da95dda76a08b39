"""Where the networks run: ``device: auto`` (the default) is the first CUDA GPU torch sees, else the CPU.

The same configuration then serves a CPU-only edge box (the detector's int8 OpenVINO export, the
U-Net through OpenVINO) and a GPU box (the PyTorch checkpoints on CUDA, fp16), with nothing to change.
A device named outright (``cpu``, ``cuda``, ``cuda:1``, ``0``) is taken as it is; one that is not there
is refused where the model is loaded, with what to set instead.
"""

from __future__ import annotations

import logging
from functools import lru_cache

log = logging.getLogger(__name__)

AUTO = "auto"


def is_cuda(device: str) -> bool:
    """``cuda``, ``cuda:N`` or a bare GPU index (ultralytics' ``0``, ``0,1``)."""
    d = device.strip().lower()
    return d.startswith("cuda") or d.replace(",", "").isdigit()


@lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """CUDA devices torch can use here (0 without torch's CUDA build or a driver)."""
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception as exc:  # noqa: BLE001 - a broken driver is a CPU box, said once
        log.warning("CUDA unusable (%s: %s): the networks run on the CPU", type(exc).__name__, exc)
        return 0


def resolve_device(device: str, what: str = "networks") -> str:
    """``device`` as the models take it: ``auto`` becomes ``cuda:0`` where a CUDA GPU is usable,
    else ``cpu`` (logged); any other value is returned as it is."""
    if device.strip().lower() != AUTO:
        return device
    if cuda_device_count() > 0:
        import torch

        log.info("%s on CUDA: %s (device auto)", what, torch.cuda.get_device_name(0))
        return "cuda:0"
    log.info("%s on the CPU (device auto: no CUDA device)", what)
    return "cpu"
