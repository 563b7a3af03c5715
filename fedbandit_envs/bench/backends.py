"""Where the jobs of a sweep run: in this process, on a local process pool, or on a Ray cluster.

Every backend yields :class:`~fedbandit_envs.bench.jobs.JobResult` objects as jobs finish (in any
order), so the sweep stores each one at once. A failing job stops the sweep: jobs not started yet are
cancelled, jobs already running are still collected, then :class:`JobFailed` is raised; a re-run of
the same sweep runs only what is missing. An interrupt (Ctrl-C, ``KeyboardInterrupt``) or a caller that stops
iterating ends the pool's worker processes at once (they ignore SIGINT themselves, so the interrupt reaches
only the calling process) and discards the jobs still running.

With ``progress=True`` every backend draws a tqdm bar of jobs done / total with the elapsed time and an
estimate of the time left, in the calling process: it advances when the caller has taken a finished job's
result, and the pool and Ray backends redraw it at least every :data:`REFRESH_SECONDS` while they wait, so
the elapsed time keeps running during long jobs. The in-process backend adds a bar per job (its slots).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from tqdm.auto import tqdm

from fedbandit_envs.bench.jobs import Job, JobResult, execute

BACKENDS = ("inprocess", "pool", "ray")

#: Seconds between redraws of the jobs bar while the pool or Ray backend waits for jobs to finish.
REFRESH_SECONDS = 1.0


class JobFailed(RuntimeError):
    """A job raised; finished jobs are stored and a re-run of the same sweep runs only the rest."""

    def __init__(self, job: Job, error: BaseException) -> None:
        super().__init__(
            f"job {job.describe()} failed with {type(error).__name__}: {error}\n"
            "Results of finished jobs are saved; fix the cause and run the same sweep again to run only the "
            "remaining jobs."
        )
        self.job = job


class Backend(ABC):
    """Runs jobs and yields their results as they finish; a subclass defines :meth:`results`."""

    #: The name used by ``--backend``.
    name: str = ""

    def run(self, jobs: Sequence[Job], progress: bool = False, label: str = "jobs") -> Generator[JobResult, None, None]:
        """Run ``jobs``; yield each result when it is ready; raise :class:`JobFailed` after a failure.

        Args:
            jobs: the jobs to run.
            progress: draw a bar of jobs done / total, elapsed time and time left (see the module docstring).
            label: the bar's description (the sweep passes the scenario name).
        """
        with tqdm(total=len(jobs), desc=label, unit="job", disable=not progress, position=0) as bar:
            results = self.results(jobs, progress, bar.refresh)
            try:
                for result in results:
                    yield result
                    bar.update()
            finally:  # a generator's cleanup runs now, also when interrupted (the pool ends its workers)
                getattr(results, "close", lambda: None)()

    @abstractmethod
    def results(self, jobs: Sequence[Job], progress: bool, tick: Callable[[], Any]) -> Iterator[JobResult]:
        """Yield the result of each of ``jobs`` as it finishes (see :meth:`run`).

        Args:
            jobs: the jobs to run.
            progress: whether bars are shown (a backend may add its own, like the in-process per-job bars).
            tick: redraws the jobs bar; call it at least every :data:`REFRESH_SECONDS` while waiting for jobs.
        """


class InProcessBackend(Backend):
    """Runs the jobs one after another in this process (per-job progress bars; easiest to debug)."""

    name = "inprocess"

    def results(self, jobs: Sequence[Job], progress: bool, tick: Callable[[], Any]) -> Iterator[JobResult]:
        """Run each job in order (``tick`` is not needed: the per-job bar moves while a job runs)."""
        for job in jobs:
            try:
                result = execute(job, progress=progress)
            except Exception as error:
                raise JobFailed(job, error) from error
            yield result


#: How often a pool worker checks that the process that started it is still alive (seconds).
PARENT_CHECK_SECONDS = 1.0


def _watch_parent(parent: int) -> None:
    """End this worker process at once when ``parent`` is no longer its parent (it died and the worker was adopted)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)


def _start_worker() -> None:
    """Pool worker initialiser: leave a Ctrl-C to the calling process (it ends the workers), and end with it.

    A worker whose sweep process dies without ending it (killed, out of memory) would otherwise finish its job and
    then wait for more forever: a daemon thread ends it within :data:`PARENT_CHECK_SECONDS` of the death.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="watch-parent", daemon=True).start()


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """Cancel the queued jobs and end the worker processes now, without waiting for the running jobs."""
    processes = list((getattr(executor, "_processes", None) or {}).values())  # no public handle before 3.14
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join()


class PoolBackend(Backend):
    """Runs the jobs on a local :class:`~concurrent.futures.ProcessPoolExecutor`, one job per worker at a time.

    Workers start with the platform's default method (fork on Linux), so scenarios and classes defined
    in the calling script are visible to them there; with spawn (macOS, Windows) algorithms must be
    importable by path.

    Args:
        workers: number of worker processes (default: every core, ``os.cpu_count()``).
    """

    name = "pool"

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and (isinstance(workers, bool) or workers < 1):
            raise ValueError(f"workers must be a positive integer (default: all {os.cpu_count()} cores), got {workers}")
        self.workers = workers or os.cpu_count() or 1

    def results(self, jobs: Sequence[Job], progress: bool, tick: Callable[[], Any]) -> Iterator[JobResult]:
        """Submit every job; yield results in completion order, calling ``tick`` while waiting."""
        if not jobs:
            return
        executor = ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), initializer=_start_worker)
        failure: tuple[Job, BaseException] | None = None
        try:
            futures = {executor.submit(execute, job): job for job in jobs}
            waiting = set(futures)
            while waiting:
                finished, waiting = wait(waiting, timeout=REFRESH_SECONDS, return_when=FIRST_COMPLETED)
                tick()
                for future in finished:
                    if future.cancelled():
                        continue
                    error = future.exception()
                    if error is None:
                        yield future.result()
                    elif failure is None:
                        failure = (futures[future], error)
                        for other in futures:
                            other.cancel()
        except BaseException:  # an interrupt, or the caller stopped early (GeneratorExit): no job is waited for
            _stop_workers(executor)
            raise
        executor.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            raise JobFailed(*failure) from failure[1]


class RayBackend(Backend):
    """Runs one Ray task per job, each declaring its resources (needs the ``ray`` extra).

    If Ray is already initialised (``ray.init(...)`` by the caller), its cluster is used and left
    running; otherwise ``ray.init(address=address, runtime_env=runtime_env)`` is called and
    ``ray.shutdown()`` when the sweep ends. Workers must be able to import ``fedbandit_envs`` and the
    algorithms' modules (install the package on every node, or ship code with ``runtime_env``).

    Args:
        address: the cluster to join (``"auto"``, ``"ray://head:10001"``); None starts a local instance.
        cpus_per_job: CPUs each task declares (``num_cpus``); a job uses one core.
        memory_per_job: bytes of memory each task declares (``memory``), or None.
        runtime_env: Ray runtime environment (e.g. ``{"working_dir": "."}``) used when this backend starts Ray.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        cpus_per_job: float = 1.0,
        memory_per_job: int | None = None,
        runtime_env: Mapping[str, Any] | None = None,
    ) -> None:
        if cpus_per_job <= 0:
            raise ValueError(f"cpus_per_job must be > 0, got {cpus_per_job}")
        if memory_per_job is not None and memory_per_job <= 0:
            raise ValueError(f"memory_per_job must be a positive number of bytes or None, got {memory_per_job}")
        self.address = address
        self.resources: dict[str, Any] = {"num_cpus": cpus_per_job}
        if memory_per_job is not None:
            self.resources["memory"] = memory_per_job
        self.runtime_env = dict(runtime_env) if runtime_env else None

    def results(self, jobs: Sequence[Job], progress: bool, tick: Callable[[], Any]) -> Iterator[JobResult]:
        """Submit one task per job; yield results in completion order, calling ``tick`` while waiting."""
        try:
            import ray
        except ImportError as error:
            raise ImportError("--backend ray needs Ray: pip install 'fedbandit-envs[ray]'") from error
        started = not ray.is_initialized()
        if started:
            ray.init(address=self.address, runtime_env=self.runtime_env, include_dashboard=False, log_to_driver=False)
        failure: tuple[Job, BaseException] | None = None
        try:
            task = ray.remote(**self.resources)(execute)
            waiting = {task.remote(job): job for job in jobs}
            while waiting:
                ready, _ = ray.wait(list(waiting), num_returns=1, timeout=REFRESH_SECONDS)
                tick()
                for ref in ready:
                    job = waiting.pop(ref)
                    try:
                        result = ray.get(ref)
                    except Exception as error:
                        if failure is None:
                            failure = (job, error)
                            for other in waiting:
                                ray.cancel(other)
                        continue
                    yield result
        finally:
            if started:
                ray.shutdown()
        if failure is not None:
            raise JobFailed(*failure) from failure[1]


def make_backend(
    name: str,
    workers: int | None = None,
    address: str | None = None,
    cpus_per_job: float = 1.0,
    memory_per_job: int | None = None,
) -> Backend:
    """The backend called ``name`` (one of :data:`BACKENDS`) with its options.

    Args:
        name: ``"inprocess"``, ``"pool"`` or ``"ray"``.
        workers: worker processes of the pool backend (default: all cores).
        address: Ray cluster address (ray backend only).
        cpus_per_job: CPUs declared per Ray task.
        memory_per_job: bytes of memory declared per Ray task.
    """
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    if address is not None and name != "ray":
        raise ValueError(f"--address only applies to --backend ray (got backend {name!r})")
    if workers is not None and name != "pool":
        raise ValueError(f"--workers only applies to --backend pool (got backend {name!r}); Ray schedules by resources")
    if name == "inprocess":
        return InProcessBackend()
    if name == "pool":
        return PoolBackend(workers)
    return RayBackend(address, cpus_per_job, memory_per_job)
