"""The engine: everything that runs per frame, and the one function that runs a recorded flight.

source -> :class:`~pipelines.types.Frame` -> base layer (road mask) -> motion layer (detector,
ego-motion, flow, tracker) -> speed -> violations -> sinks. What lives here, by floor:

* domain types, errors and config: ``types``, ``errors``, ``config``, ``serialize``;
* the math: ``camera``, ``geometry``, ``ground``, ``displacement``, ``speed/`` (fits, their noise,
  the sigma model, the estimator), ``rules``;
* the layers: ``road_network`` and ``base_layer``; ``motion/`` (detector, input size, ego-motion,
  flow, keyframes, tracker, relinking);
* assembly and running: ``builder.build_pipeline(config)`` (the only place a pipeline is built, for
  the live server and the offline evaluator alike), ``pipeline.Pipeline`` (one frame at a time),
  ``sources`` and ``telemetry/`` (recorded video and DJI .SRT), ``sinks`` and ``annotate``,
  ``runner.process_flight`` (one recorded flight), ``cli`` (``airpatrol bench``, ``cameras`` and the
  one-flight ``process``).

Who may import it: every package above it (``batch``, ``eval``, ``edge_server``, ``edge_client``,
``training``, ``airpatrol``). It imports none of them, no web, database or Ray code
(``tests/pipelines/test_builder.py`` checks); models are injected, so tests pass fakes.
"""
