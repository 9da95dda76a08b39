"""The ultralytics arguments the detector passes for a precision, in the ultralytics installed."""

from __future__ import annotations

from pipelines.ultralytics_env import precision_args, prepare_ultralytics


def test_precision_args_pass_nothing_for_the_default_precision() -> None:
    assert precision_args(False) == {}


def test_precision_args_name_fp16_as_the_installed_ultralytics_does() -> None:
    prepare_ultralytics()
    from ultralytics.cfg import DEFAULT_CFG_DICT, get_cfg

    args = precision_args(True)
    assert args in ({"quantize": 16}, {"half": True})
    assert ("quantize" in args) == ("quantize" in DEFAULT_CFG_DICT)
    cfg = get_cfg(overrides=dict(args))  # ultralytics reads it as fp16
    assert getattr(cfg, "quantize", None) == 16 or getattr(cfg, "half", None) is True
