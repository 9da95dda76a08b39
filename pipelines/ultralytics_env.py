"""Make ultralytics safe offline: no downloads, no pip auto-installs, no telemetry.

Call :func:`prepare_ultralytics` before the first ``import ultralytics``. It sets environment
defaults (a user's own settings win) and puts a font where ultralytics looks for one, so that
nothing it does at run time tries the network. Where a machine can download, a user may set
``YOLO_OFFLINE=0`` themselves.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)
_done = False


def config_dir() -> Path:
    return Path(os.environ.get("YOLO_CONFIG_DIR") or Path.home() / ".config" / "airpatrol-yolo")


def prepare_ultralytics() -> None:
    global _done
    if _done:
        return
    cfg = config_dir()
    os.environ.setdefault("YOLO_CONFIG_DIR", str(cfg))
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    os.environ.setdefault("YOLO_VERBOSE", "false")
    font_dir = cfg / "Ultralytics"
    font_dir.mkdir(parents=True, exist_ok=True)
    missing = [n for n in ("Arial.ttf", "Arial.Unicode.ttf") if not (font_dir / n).exists()]
    if missing:
        try:
            import matplotlib

            src = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
            for name in missing:
                shutil.copyfile(src, font_dir / name)
        except (ImportError, OSError) as exc:  # plotting fonts only; detection still works
            log.debug("could not place a font for ultralytics: %s", exc)
    from ultralytics import settings

    try:
        settings.update({"sync": False})
    except Exception as exc:  # noqa: BLE001 - a read-only settings file must not stop inference
        log.debug("could not update ultralytics settings: %s", exc)
    _done = True


def precision_args(half: bool) -> dict[str, object]:
    """The ``predict`` arguments for fp16 (``half``) or the default precision, in the ultralytics
    installed: newer releases name fp16 ``quantize=16`` and log a deprecation warning on *every*
    call that passes ``half`` (hundreds of lines a minute on a live server), older ones know only
    ``half``. The default precision passes nothing."""
    if not half:
        return {}
    from ultralytics.cfg import DEFAULT_CFG_DICT

    return {"quantize": 16} if "quantize" in DEFAULT_CFG_DICT else {"half": True}
