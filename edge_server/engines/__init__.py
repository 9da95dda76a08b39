"""A stream's engine in a process of its own (``settings.engine_processes``).

``supervisor`` (:class:`EngineProcesses`: start, count the lost, health), ``remote`` (the server's
side, :class:`RemotePipeline`, a pipeline to the stream's worker), ``child`` (the process's side),
``slots`` (frames through shared memory), ``preload`` (the fork server's imports).

The server imports ``supervisor``, ``remote``, ``child`` and ``slots``, never the engine itself:
``child`` and ``preload`` import ``pipelines.builder`` (torch, the models) only in the engine
processes, so the server process stays without them.
"""
