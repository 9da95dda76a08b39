"""Training tools: dataset converters, detector and road-mask training, ONNX dequantisation.

Nothing here is imported by the engine (``pipelines``); the ``airpatrol train`` commands live in
:mod:`training.cli`.
"""
