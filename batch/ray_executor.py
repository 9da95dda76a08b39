"""A batch on Ray: :class:`RayExecutor`, one Ray task per item on a local Ray or an existing
cluster, and what runs in the tasks. Ray is imported only when a :class:`RayExecutor` starts."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batch.commit import Job, run_item
from batch.errors import BatchError
from batch.progress import BatchProgress, Outcome

log = logging.getLogger(__name__)


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast with a clear message when nothing listens at a cluster's address (ray.init would
    retry for minutes). ``auto`` is left to Ray (it reads the address of this machine's cluster)."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise BatchError(f"--ray {address}: expected 'auto', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise BatchError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} (is `ray start --head` "
            "running there, and the port open?)"
        ) from None


def _ray_task(job: Job, item: Any, out_root: str, fp: str, tally: Any) -> dict[str, Any]:
    """The body of one Ray task (module level, so workers import it from the installed package)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def report(name: str, attempt: str, frames: int) -> None:
        tally.running.remote(name, attempt, frames)

    return run_item(job, item, Path(out_root), fp, attempt_note="ray", report=report, report_every_s=1.0)


class _FrameTally:
    """A Ray actor the tasks tell their frames to; the driver reads it for the batch's progress."""

    def __init__(self) -> None:
        self.frames: dict[str, tuple[str, int]] = {}

    def running(self, name: str, attempt: str, frames: int) -> None:
        self.frames[name] = (attempt, frames)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        return dict(self.frames)


@dataclass
class RayExecutor:
    """One Ray task per item. ``address``: None starts a local Ray on this machine with ``workers``
    task slots; ``"auto"`` joins the cluster this machine belongs to; ``host:port`` or
    ``ray://host:10001`` another one. Inputs and the output folder must be at the same path on every
    node (a shared filesystem; docs/scale-out.md). A task whose worker dies is retried (``retries``);
    a task that raises (a corrupt video) is reported as failed and not retried."""

    address: str | None = None
    workers: int | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    retries: int = 3
    _started: bool = field(default=False, init=False)

    @property
    def description(self) -> str:
        where = "local Ray" if self.address is None else f"Ray at {self.address}"
        return (
            f"{where}, {self.cpus_per_task:g} CPU"
            + (f" + {self.gpus_per_task:g} GPU" if self.gpus_per_task else "")
            + " per task"
        )

    def start(self) -> dict[str, Any]:
        try:
            import ray
        except ImportError as exc:
            raise BatchError("--ray needs Ray: pip install 'airpatrol[ray]' (or ray>=2.40)") from exc
        if ray.is_initialized():
            return ray.cluster_resources()
        env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("AIRPATROL_", "YOLO_"))}}
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "runtime_env": env}
        if self.address is None:
            cpus = self.workers * self.cpus_per_task if self.workers else None
            kwargs |= {"num_cpus": cpus, "num_gpus": None}
            ray.init(**kwargs)
        else:
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BatchError(f"cannot reach the Ray cluster at {self.address}: {exc}") from exc
        self._started = True
        return ray.cluster_resources()

    def stop(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def run(
        self,
        job: Job,
        items: Sequence[Any],
        fps: Sequence[str],
        out_root: Path,
        progress: BatchProgress,
    ) -> None:
        import ray

        resources = self.start()
        log.info("Ray cluster: %s", {k: v for k, v in resources.items() if not k.startswith("node:")})
        if self.gpus_per_task and resources.get("GPU", 0) < self.gpus_per_task:
            raise BatchError(
                f"--gpus-per-task {self.gpus_per_task:g} but the Ray cluster has {resources.get('GPU', 0):g} GPU(s)"
            )
        remote = ray.remote(_ray_task).options(
            num_cpus=self.cpus_per_task,
            num_gpus=self.gpus_per_task,
            max_retries=self.retries,
            retry_exceptions=False,
        )
        job_ref = ray.put(job)
        tally = ray.remote(num_cpus=0)(_FrameTally).remote()
        pending = {}
        for item, fp in zip(items, fps, strict=True):
            ref = remote.remote(job_ref, item, str(out_root.resolve()), fp, tally)
            pending[ref] = job.name_of(item)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for name, (attempt, frames) in ray.get(tally.snapshot.remote()).items():
                progress.running(name, attempt, frames)
            for ref in ready:
                name = pending.pop(ref)
                try:
                    progress.done(Outcome(name, record=ray.get(ref)))
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    log.error("%s failed: %s", name, cause)
                    progress.done(Outcome(name, error=f"{type(cause).__name__}: {cause}"))
                except ray.exceptions.RayError as exc:  # worker died more often than retries allow
                    log.error("%s failed: %s", name, exc)
                    progress.done(Outcome(name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
