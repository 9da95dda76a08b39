"""Recover float YOLOv8 weights from an int8-quantised ONNX export.

The only COCO YOLOv8n weights reachable offline are int8 exports (``yolov8n_int8.onnx``, quantised
with onnxruntime: ``DynamicQuantizeLinear`` + ``ConvInteger`` with uint8/int8 weight initialisers
and per-tensor or per-channel scales / zero points; or QDQ graphs with ``DequantizeLinear``).
Ultralytics exports fuse each Conv+BatchNorm into one convolution with a bias, so the float model
is rebuilt as::

    conv.weight = (q - zero_point) * scale      bn.weight = 1, bn.bias = conv bias,
    bn.running_mean = 0, bn.running_var = 1 - eps

which reproduces the fused convolution exactly and can be trained again (BatchNorm statistics then
adapt to the new data).

Initialisers are matched by name first (ultralytics keeps ``model.<i>.<...>.weight`` names through
export and quantisation) and, for graphs whose names were lost, by order and shape.
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


@dataclass
class DequantizedWeights:
    """Float conv weights/biases keyed by the fused module name (e.g. ``model.0.conv``)."""

    weights: dict[str, np.ndarray] = field(default_factory=dict)
    biases: dict[str, np.ndarray] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> dict[int, str]:
        raw = self.metadata.get("names")
        return {int(k): str(v) for k, v in ast.literal_eval(raw).items()} if raw else {}


def _dequant(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int = 0) -> np.ndarray:
    q = q.astype(np.float32)
    scale = np.asarray(scale, dtype=np.float32)
    zp = np.zeros_like(scale) if zero_point is None else np.asarray(zero_point).astype(np.float32)
    if scale.ndim == 1 and scale.size > 1:  # per-channel
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return (q - zp) * scale


def read_quantized_onnx(path: str | Path) -> DequantizedWeights:
    """Read every convolution weight of a (quantised or float) ONNX graph as float32."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out = DequantizedWeights(metadata={p.key: p.value for p in model.metadata_props})

    def const(name: str) -> np.ndarray | None:
        return inits.get(name)

    # producer of each tensor, to follow DequantizeLinear -> Conv
    dq_of: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
            zp = const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
            dq_of[node.output[0]] = _dequant(inits[node.input[0]], const(node.input[1]), zp, axis)

    for node in model.graph.node:
        if node.op_type == "ConvInteger":
            wq = node.input[1]
            base = wq.removesuffix("_quantized")
            scale = const(base + "_scale")
            if scale is None:
                raise ValueError(f"no scale for {wq} in {path}")
            zp = const(node.input[3]) if len(node.input) > 3 and node.input[3] else None
            out.weights[_module_name(base, node.name)] = _dequant(inits[wq], scale, zp, axis=0)
        elif node.op_type == "Conv":
            w = dq_of.get(node.input[1], inits.get(node.input[1]))
            if w is None:
                continue
            name = _module_name(node.input[1], node.name)
            out.weights[name] = w.astype(np.float32)
            if len(node.input) > 2 and node.input[2]:
                b = dq_of.get(node.input[2], inits.get(node.input[2]))
                if b is not None:
                    out.biases[name] = b.astype(np.float32)
    # ConvInteger graphs add the bias afterwards: model.<i>...bias initialisers keep their names
    for name, arr in inits.items():
        if name.endswith(".bias") and arr.dtype == np.float32:
            mod = name[: -len(".bias")]
            if mod in out.weights:
                out.biases.setdefault(mod, arr.astype(np.float32))
    log.info("read %d conv weights (%d biases) from %s", len(out.weights), len(out.biases), path)
    return out


def _module_name(weight_name: str, node_name: str) -> str:
    """``model.0.conv.weight_quantized`` -> ``model.0.conv``; else derived from the node name."""
    name = weight_name.removesuffix("_quantized").removesuffix("_DequantizeLinear")
    if name.startswith("model.") and name.endswith(".weight"):
        return name[: -len(".weight")]
    # '/model.22/cv2.0/cv2.0.0/conv/Conv' -> 'model.22.cv2.0.0.conv'
    parts = [p for p in node_name.split("/") if p]
    if parts and parts[0].startswith("model."):
        keep = [parts[0]] + [p.split(".")[-1] if i < len(parts) - 2 else p for i, p in enumerate(parts[1:-1])]
        return ".".join(keep)
    return weight_name


def load_into_yolo(
    model,
    weights: DequantizedWeights,
    class_rows: list[int] | None = None,
    head_slicing: bool = True,
) -> dict[str, int]:
    """Copy dequantised weights into an ultralytics ``DetectionModel`` (unfused Conv+BN modules).

    ``class_rows`` maps each output class of ``model`` to a class row of the source head (e.g. a
    5-class aerial model initialised from COCO rows ``[2, 2, 7, 5, 3]``). Returns counts of what
    was copied. Names are matched first; whatever is left is matched by order and shape.

    With few classes the class branch (``cv3``) of a YOLOv8 head is narrower than COCO's
    (``max(c, min(nc, 100))`` hidden channels: 64 instead of 80 for yolov8n). With
    ``head_slicing`` its convolutions keep the first hidden channels of the source; an
    approximation, but a far better start than random for the class branch.
    """
    import torch
    from torch import nn

    convs: dict[str, nn.Conv2d] = {n: m for n, m in model.named_modules() if isinstance(m, nn.Conv2d)}
    # the DFL conv is fixed (arange) and not trained; keep ultralytics' own
    convs = {n: m for n, m in convs.items() if not n.endswith("dfl.conv")}
    modules = dict(model.named_modules())
    src = {k: v for k, v in weights.weights.items() if not k.endswith("dfl.conv")}
    stats = {"by_name": 0, "by_order": 0, "class_rows": 0, "sliced": 0, "skipped": 0}

    def put(name: str, conv: nn.Conv2d, w: np.ndarray, b: np.ndarray | None) -> bool:
        wt = torch.from_numpy(w)
        bt = torch.from_numpy(b) if b is not None else None
        if wt.shape != conv.weight.shape:
            fitted = _fit_head_conv(name, wt, bt, conv.weight.shape, class_rows, head_slicing, stats)
            if fitted is None:
                return False
            wt, bt = fitted
        _copy_conv(name, conv, modules, wt, bt)
        return True

    left_dst, mismatched = [], []
    for name, conv in convs.items():
        if name not in src:
            left_dst.append(name)
        elif put(name, conv, src.pop(name), weights.biases.get(name)):
            stats["by_name"] += 1
        else:
            mismatched.append(name)
    # order/shape fallback for graphs that lost their names
    left_src = list(src)
    for name in list(left_dst):
        for sname in left_src:
            if src[sname].shape == tuple(convs[name].weight.shape):
                put(name, convs[name], src[sname], weights.biases.get(sname))
                left_src.remove(sname)
                left_dst.remove(name)
                stats["by_order"] += 1
                break
    left_dst += mismatched
    stats["skipped"] = len(left_dst)
    if left_dst:
        log.warning("no dequantised weights for %d convs: %s", len(left_dst), left_dst[:5])
    log.info("dequantised weights copied: %s", stats)
    return stats


def _fit_head_conv(name, wt, bt, shape, class_rows, head_slicing: bool, stats: dict[str, int]):
    """``(weight, bias)`` of a source conv cut to ``shape`` (a narrower class branch ``cv3`` of the
    head: the ``class_rows`` of the last conv, else the first hidden channels); ``None`` when it
    cannot be cut to fit."""
    if not head_slicing or ".cv3." not in name or wt.shape[2:] != shape[2:]:
        return None
    out_c, in_c = shape[:2]
    if wt.shape[1] < in_c:
        return None
    is_last = wt.shape[1] >= in_c and name.endswith(tuple(f".cv3.{i}.2" for i in range(8)))
    if is_last and class_rows is not None and len(class_rows) == out_c and max(class_rows) < wt.shape[0]:
        rows = list(class_rows)
        stats["class_rows"] += 1
    elif wt.shape[0] >= out_c:
        rows = list(range(out_c))  # fewer hidden channels: keep the first ones
        stats["sliced"] += 1
    else:
        return None
    return wt[rows][:, :in_c], (bt[rows] if bt is not None else None)


def _copy_conv(name: str, conv, modules: dict, wt, bt) -> None:
    """Weight into ``conv``; the bias into its BatchNorm (as an identity BN with that shift) or
    into the conv's own bias."""
    import torch
    from torch import nn

    with torch.no_grad():
        conv.weight.copy_(wt)
        parent = name.rsplit(".", 1)[0]
        bn = modules.get(parent + ".bn") if name.endswith(".conv") else None
        if isinstance(bn, nn.BatchNorm2d):
            bn.weight.fill_(1.0)
            bn.bias.copy_(bt if bt is not None else torch.zeros_like(bn.bias))
            bn.running_mean.zero_()
            bn.running_var.fill_(1.0 - bn.eps)
        elif conv.bias is not None:
            conv.bias.copy_(bt if bt is not None else torch.zeros_like(conv.bias))
