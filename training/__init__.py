"""Training tools: dataset converters, detector and road-mask training, ONNX dequantisation.

What lives here: ``samples``, ``datasets`` and ``copy_paste`` (labelled images from VisDrone-DET,
aerial-cars, AU-AIR and simulated flights), ``detector`` (YOLO training) with its checkpoints
(``detector_checkpoints``) and exports (``detector_export``: ONNX, OpenVINO, NNCF int8), ``yolo_dataset``,
``evaluate`` (AP of a detector on held-out images, as the engine runs it), the road U-Net
(``road_data``, ``road_model``, ``road_train``, ``road_metrics``, ``road_pseudo``), ``dequant`` and
``defaults``; ``recipes/`` holds the scripts
that made the shipped models. The ``airpatrol train`` commands live in :mod:`training.cli`.

It imports ``pipelines`` (the engine's detector adapter, config and input-size rule); only the
``airpatrol`` command and the tests import it, never the engine, the server or the evaluator.
"""
