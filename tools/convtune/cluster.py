"""Ray for the lab's long runs: `convgen tune --ray` and `convgen fuzz --ray` send their
work to a Ray cluster (ray, the maintained engine: scheduling, retries of dead tasks,
shipping the code), one task per problem or per seed.

    --ray                 a new Ray cluster on this machine (ray.init(); $RAY_ADDRESS, where
                          set, names a running one instead)
    --ray=auto            the cluster this machine joined (`ray start --address ...`)
    --ray=HOST:PORT       a cluster's head (ray://HOST:10001 through Ray Client)

A task asks for one GPU where the cluster has GPUs (Ray narrows CUDA_VISIBLE_DEVICES to
it), else one CPU (the interpreter: the tests' cluster). The code of convgen and the lab
goes with the tasks to another machine's workers (runtime_env py_modules); torch and
Triton must be installed there. docs/scale-out.md: how to run one and what it costs.
"""
from __future__ import annotations

import logging
import os

from convgen import REPO_ROOT
from convgen.errors import ConvgenError
from convgen.flags import one_line, switch_or_text

RETRIES = 3   # a task whose worker died (a crash, a node lost) runs again this often
PACKAGES = ("convgen", "convtune", "convfuzz")
LOCAL_STORE_BYTES = 256 << 20   # a local cluster's object store: tasks send text, not tensors


# the --ray flag of tune and fuzz: alone "", =false None, else the address
address = switch_or_text("auto or a cluster's address (HOST:PORT, ray://HOST:PORT)")


def _answers(where: str, seconds: float = 5.0) -> None:
    """A ConvgenError where nothing answers at a HOST:PORT address (ray.init would retry
    it for minutes); "" and auto are Ray's to find."""
    import socket
    hostport = where[len("ray://"):] if where.startswith("ray://") else where
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        if where and where != "auto":
            raise ConvgenError(f"{where}: expected auto, HOST:PORT or ray://HOST:PORT",
                               field="ray")
        return
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as e:
        raise ConvgenError(f"nothing answers at {where} ({e.strerror or e}); is the "
                           "cluster's head started (ray start --head)?", field="ray") from None


class Cluster:
    """A connection to a Ray cluster for one run (a context manager): on a new local
    cluster, `workers` tasks run at once (its CPUs; a machine with GPUs runs one task per
    GPU whatever it is); it ends with the run."""

    def __init__(self, where: str = "", workers: int | None = None):
        self.where = where
        self.workers = workers
        self.ray = None
        # a cluster this run starts on this machine (its workers see this checkout), not one
        # reached by address (the code goes with the tasks, the repository's files do not)
        self.local = not where and not os.environ.get("RAY_ADDRESS")

    def __enter__(self) -> "Cluster":
        try:
            import ray  # ray: the engine (constraints.txt pins it)
        except ImportError as e:
            raise ConvgenError(f"--ray needs the ray package and what it imports ({e}; pip install "
                               "-c constraints.txt ray)", field="ray") from None
        self.ray = ray
        options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
                       ignore_reinit_error=True)
        tools = os.path.join(REPO_ROOT, "tools")
        if self.local:
            # workers start from this process's environment; the tools folder goes on their
            # path where this process found them some other way (scripts/ insert it)
            path = [tools, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
            os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
            options.update(num_cpus=self.workers, object_store_memory=LOCAL_STORE_BYTES)
            # its note on token authentication is about clusters others join, not this one
            logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
                logging.ERROR)
        else:
            import importlib
            options["runtime_env"] = {"py_modules": [importlib.import_module(p) for p in PACKAGES]}
        _answers(self.where)
        try:
            # "local": a new cluster even where this machine joined one with `ray start`
            ray.init(address="local" if self.local else (self.where or None), **options)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ConvgenError(f"no Ray cluster at {self.where or os.environ.get('RAY_ADDRESS') or 'this machine'}: "
                               f"{one_line(e)[:300]}", field="ray") from None
        return self

    def __exit__(self, *exc) -> bool:
        # the run's tasks end with it: Ray stops a job's workers when its driver leaves (no
        # ray.cancel: cancelling a task as it finishes aborts Ray 2.60's driver)
        if self.ray is not None:
            self.ray.shutdown()
        return False

    def gpus(self) -> int:
        return int(self.ray.cluster_resources().get("GPU", 0))

    def slots(self) -> int:
        """How many tasks run at once: the cluster's GPUs, else its CPUs."""
        res = self.ray.cluster_resources()
        return int(res.get("GPU", 0)) or max(1, int(res.get("CPU", 1)))

    def remote(self, fn):
        """fn as a task of one GPU (or one CPU), retried when its worker dies; an error
        it raises is not retried (it is the problem's, and comes back)."""
        need = {"num_gpus": 1, "num_cpus": 1} if self.gpus() else {"num_cpus": 1}
        return self.ray.remote(max_retries=RETRIES, retry_exceptions=False, **need)(fn)

    def as_completed(self, refs: list):
        """Yield (index, result, error) for each task as it finishes: error the task's own
        exception (a ConvgenError as raised), or Ray's where the task died more often than
        it is retried."""
        ray = self.ray
        index = {r: i for i, r in enumerate(refs)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    yield index[r], ray.get(r), None
                except ray.exceptions.RayTaskError as e:
                    yield index[r], None, e.cause if isinstance(e.cause, Exception) else e
                except ray.exceptions.RayError as e:
                    yield index[r], None, e
