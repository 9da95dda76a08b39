"""The spare pipeline (``settings.warm_pipeline``): :class:`SparePipeline` keeps one pipeline built
ahead for the next stream, so a stream starts without seconds of model loading while an RTMP
publisher already sends, and gives each new stream its pipeline (the spare, or a new one)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edge_server.settings import ServerSettings
from edge_server.streams.errors import CapacityError, PipelineUnavailable
from edge_server.worker import close_pipeline
from pipelines.errors import AirPatrolError

if TYPE_CHECKING:  # the engine (torch, models) loads when the first pipeline is built
    from pipelines.pipeline import Pipeline

log = logging.getLogger(__name__)


class SparePipeline:
    """Runs on the media loop. ``spawn`` runs a coroutine in the background there;
    ``shutting_down()`` says the server is closing its streams (no pipeline is kept then)."""

    def __init__(
        self,
        settings: ServerSettings,
        pipeline_factory: Callable[[], Pipeline],
        spawn: Callable[[Any], None],
        shutting_down: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.pipeline_factory = pipeline_factory
        self._spawn = spawn
        self._shutting_down = shutting_down
        self._spare: Pipeline | None = None  # built ahead for the next stream (settings.warm_pipeline)
        self._building = False

    async def take(self) -> Pipeline:
        """The spare pipeline when one is ready (``settings.warm_pipeline``), else a new one."""
        pipeline, self._spare = self._spare, None
        if pipeline is not None and not getattr(pipeline, "alive", True):  # its engine process died
            log.warning("the spare pipeline's engine is gone; building another")
            await asyncio.to_thread(close_pipeline, pipeline)
            pipeline = None
        if pipeline is None:
            try:
                pipeline = await asyncio.to_thread(self.pipeline_factory)
            except AirPatrolError as exc:
                raise PipelineUnavailable(f"pipeline unavailable: {exc}") from exc
            if self._shutting_down():  # close_all() ran while the pipeline was being built
                await asyncio.to_thread(close_pipeline, pipeline)
                raise CapacityError("server is shutting down")
        self.build_next()
        return pipeline

    @property
    def ready(self) -> bool:
        """Whether a pipeline is built for the next stream (settings.warm_pipeline)."""
        return self._spare is not None

    def build_next(self) -> None:
        """A new stream takes a pipeline built before it came (no seconds of model loading while an
        RTMP publisher already sends); the next spare is built while the stream starts."""
        if (
            not self.settings.warm_pipeline
            or self._shutting_down()
            or self._spare is not None
            or self._building
        ):
            return
        self._building = True

        async def build() -> None:
            try:
                pipeline = await asyncio.to_thread(self.pipeline_factory)
            except Exception as exc:  # noqa: BLE001 - a stream then builds its own, and says why it cannot
                log.warning("spare pipeline not built: %s", exc)
                return
            finally:
                self._building = False
            if self._shutting_down() or self._spare is not None:
                await asyncio.to_thread(close_pipeline, pipeline)
                return
            self._spare = pipeline

        self._spawn(build())

    async def close(self) -> None:
        """The server shuts down: the spare, if any, is closed."""
        spare, self._spare = self._spare, None
        if spare is not None:
            await asyncio.to_thread(close_pipeline, spare)


__all__ = ["SparePipeline"]
