"""The model in Ray Serve replicas: many copies of the runner behind the one Gradio front end.

`python app.py --replicas N` serves every run from one of N replicas of `ModelReplica`, a Serve deployment
whose replica loads the model (one GPU each on CUDA, one torch thread each on CPU) and runs
dg.modes.stream_mode under a `dg.engine.turns.Ticket`, so a seed gives its solo tokens however runs
interleave there. The app's process keeps what it keeps with a worker process (dg.engine.worker): the model's
meta-device skeleton, the line, turns, budgets and sessions (dg.engine.turns, runs); `InReplicas` is its
runner (dg.engine.runner.Runner). A run is one streamed call (`handle.options(stream=True)`), so it stays on
its replica from first record to last; dg.engine.routing sends a new run to the least-loaded replica, keeps
the three lanes of a race and the two runs of an A/B pair (runs given one inputs dict) on one replica, and sends a stop to the
run's own replica, which ends the run between two steps. A stop seen in the app drops the steps that arrived
after it, as the worker does (`dg.trace.RunEnd.before`), so a budget or a Stop ends a run exactly.

Ray starts on this host (127.0.0.1, no dashboard, no Serve HTTP proxy: handles only) unless a cluster
address is given (`--ray-address` or RAY_ADDRESS). `--replicas 2-8` lets Serve's autoscaling choose between
the bounds. Faults are one line: a replica killed mid-run ends that run (its partial trace kept) while the
others go on and Serve starts a replacement; a replica that cannot load the model, or a cluster without the
CPUs or GPUs asked for, fails the start-up.

    python app.py --replicas 2            # two replicas of the embedded model on a local Ray
    python -m dg.bench.serve --users 16 --runs 3 --replicas 1,2
"""

import asyncio
import math
import os
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from pathlib import Path

import ray
import torch
from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.exceptions import RayServeException

from dg.config import SamplerConfig
from dg.engine.memory import trim
from dg.engine.routing import PLACEMENT
from dg import modes
from dg.engine.runner import Hosted
from dg.engine.turns import Ticket
from dg.engine.worker import HostInfo, _raise, yield_threads
from dg.loading import EMBEDDED_MODEL, Loaded, load, load_skeleton, one_line
from dg.denoise import denoise_once
from dg.trace import RunEnd

ROOT = Path(__file__).resolve().parents[2]  # on the replicas' PYTHONPATH: they import dg as the app does
APP_NAME = "dg"  # Ray's namespace; each app's Serve application is dg-<random> (several apps may share a cluster)
DEPLOYMENT = "model"
CPU_THREADS = 1  # torch threads per replica on CPU: N replicas use N cores, none spins against another
MAX_ONGOING = 512  # calls a replica takes at once: runs are bounded by dg.engine.turns, never by Serve's queue
INFO_TIMEOUT_S = 600.0  # a replica answers its first question once its model is loaded
OPEN_TRIES = 3  # replicas a run may find dead before its first record before it fails
HEALTH_CHECK_S = 2.0  # how often Serve checks a replica: a dead one is replaced within a few of these
RUN_KINDS = ("step", "token", "round")  # the records a stop ends a run before


class ReplicaLost(RuntimeError):
    """The replica serving a run ended while the run was open (killed, out of memory, its node gone)."""


@dataclass(frozen=True)
class ReplicaSpec:
    """How many replicas, and what each reserves. `min_replicas < max_replicas`: Serve autoscales between them,
    adding a replica past `target_runs` open runs each."""

    min_replicas: int = 1
    max_replicas: int = 1
    cpus: float = 1.0  # Ray CPUs each replica reserves on a CPU-only cluster (tests use less)
    target_runs: float = 2.0
    address: str | None = None  # a running Ray cluster ("auto", "ray://host:10001"); None: RAY_ADDRESS, else local

    def __post_init__(self):
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"replicas must be N or MIN-MAX with 1 <= MIN <= MAX, got {self.min_replicas}-"
                             f"{self.max_replicas}")
        if self.cpus <= 0 or self.target_runs <= 0:
            raise ValueError(f"cpus and target_runs must be > 0, got {self.cpus} and {self.target_runs}")

    @classmethod
    def parse(cls, text: str, **kwargs) -> "ReplicaSpec":
        """`--replicas N` or `--replicas MIN-MAX`."""
        found = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", str(text))
        if not found:
            raise ValueError(f"--replicas takes N or MIN-MAX (e.g. 2-8), got {text!r}")
        low = int(found[1])
        return cls(low, int(found[2] or low), **kwargs)

    @property
    def autoscaled(self) -> bool:
        return self.max_replicas > self.min_replicas

    def __str__(self) -> str:
        return f"{self.min_replicas}-{self.max_replicas}" if self.autoscaled else str(self.min_replicas)


# -- a replica ---------------------------------------------------------------------------------------
class ModelReplica:
    """One replica: the model loaded on its device and the runs open on it. Records are made one at a time
    on one thread (torch's RNG is the process's; each run's Ticket puts its own state back), so the runs on
    a replica take turns step by step, as in one process."""

    def __init__(self, source: str, device: str, count: str):
        """`count`: how many replicas serve ("4", or "2-8" autoscaled), for this replica's name."""
        context = serve.get_replica_context()
        gpus = ray.get_gpu_ids()
        where = f"cuda:{gpus[0]}" if device == "cuda" and gpus else device
        self.name = f"replica {context.rank.rank + 1}/{count} · {where}"
        self.id = context.replica_id.unique_id  # what dg.engine.routing routes by
        self.cancels: dict[str, threading.Event] = {}
        self.maker = ThreadPoolExecutor(1, thread_name_prefix="dg-replica")
        self.info, self.error = None, None
        try:
            self.loaded = load(source, device)
            if self.loaded.device.type == "cpu":
                torch.set_num_threads(CPU_THREADS)
            model = self.loaded.model
            self.info = HostInfo(self.loaded.source, self.loaded.describe(), model.config, model.generation_config,
                                 self.loaded.sampler_config, self.loaded.dtype)
        except Exception as err:  # reported by `hello`: the app's start-up fails with this line
            self.loaded, self.error = None, f"{self.name} cannot load the model: {one_line(err)}"

    def hello(self, route=None) -> dict:
        """Who this replica is and what it loaded (or why it could not)."""
        return {**self.who(), "info": self.info, "error": self.error}

    def who(self) -> dict:
        """This replica's name, routing id and process id."""
        return {"name": self.name, "id": self.id, "pid": os.getpid()}

    async def stream(self, run_id: str, mode: str, inputs: dict, settings: SamplerConfig, seed: int | None,
                     draft=None, route=None):
        """`who()`, then the run's records (`draft`: a diffusion run's warm start and pins, dg.drafts); its
        RunStart names this replica."""
        yield self.who()  # first, so the app can count the run off this replica whatever follows
        if self.error:
            raise RuntimeError(self.error)
        cancel = self.cancels[run_id] = threading.Event()
        inputs = {k: v.to(self.loaded.device) if torch.is_tensor(v) else v for k, v in inputs.items()}
        draft = None if draft is None else draft.on(self.loaded.device)
        records = modes.stream_mode(self.loaded.model, mode, inputs, settings, cancel=cancel, draft=draft,
                                    path=self.loaded.path)
        ticket = Ticket(seed, cancel)
        loop = asyncio.get_running_loop()
        try:
            while True:
                record = await loop.run_in_executor(self.maker, self._make, records, ticket)
                if record is None:
                    return
                if record.kind == "start":
                    record = replace(record, config={**record.config, "replica": self.name})
                yield record
                if record.kind == "end":
                    return
        finally:
            cancel.set()  # a closed call (the app went away) ends the run at its next step
            self.cancels.pop(run_id, None)
            self.maker.submit(self._close, records)

    @staticmethod
    def _make(records, ticket: Ticket):
        ticket.restore_rng()  # torch.manual_seed(seed) before the first record, else the state it left
        try:
            return next(records, None)
        finally:
            ticket.save_rng()

    @staticmethod
    def _close(records) -> None:
        records.close()
        trim()  # what the run freed goes back to the system

    def stop(self, run_id: str, route=None) -> None:
        """End the run between two steps (its generator's own "cancelled" end)."""
        cancel = self.cancels.get(run_id)
        if cancel is not None:
            cancel.set()

    async def denoise(self, prompt: str, canvas_ids: list[int], route=None) -> dict:
        """Learn's one decoder pass (dg.denoise.denoise_once), between two records of the open runs."""
        if self.error:
            raise RuntimeError(self.error)
        return await asyncio.get_running_loop().run_in_executor(
            self.maker, denoise_once, self.loaded.model, self.loaded.processor, prompt, canvas_ids)


# -- the app's side ----------------------------------------------------------------------------------
def _one_line_error(err: BaseException, replica: str) -> BaseException:
    """A replica's exception as the app shows it: the run's own error as itself (one line), a lost replica
    as ReplicaLost."""
    if isinstance(err, ray.exceptions.RayTaskError) and not isinstance(err, ray.exceptions.RayActorError):
        cause = err.cause if isinstance(err.cause, BaseException) else err
        try:
            _raise(type(cause).__name__, one_line(cause))
        except Exception as again:
            return again
    return ReplicaLost(f"{replica} was lost mid-run ({type(err).__name__}); Serve starts a replacement and the "
                       "next runs go to the replicas serving")


class ServeReplicas:
    """The app's handle on the deployment: starts Ray and Serve, streams runs, stops them, shuts down."""

    def __init__(self, spec: ReplicaSpec, source: str):
        # a folder as an absolute path: a replica's working directory is Ray's, not the app's
        self.spec, self.source = spec, str(Path(source).resolve()) if Path(source).exists() else str(source)
        self.handle = None
        self.app_name = f"{APP_NAME}-{uuid.uuid4().hex[:8]}"
        self.device = "cpu"
        self.info: HostInfo | None = None
        self._own_ray = False

    def start(self) -> HostInfo:
        """Join the cluster (or start Ray here), check it can hold the replicas, deploy them and wait until
        they have loaded the model; a ValueError of one line when any of that fails."""
        try:
            self._join()
            self.device = "cuda" if ray.cluster_resources().get("GPU", 0) > 0 else "cpu"
            self._check_room()
            serve.start(proxy_location="Disabled")
            app = self._deployment().bind(self.source, self.device, str(self.spec))
            self.handle = serve.run(app, name=self.app_name, route_prefix=None)
            hello = self.handle.hello.remote(route=None).result(timeout_s=INFO_TIMEOUT_S)
        except ValueError:
            self.close()
            raise
        except Exception as err:
            self.close()
            raise ValueError(f"the model replicas did not start: {one_line(err)}") from None
        if hello["error"]:
            self.close()
            raise ValueError(hello["error"])
        self.info = hello["info"]
        return self.info

    def _join(self) -> None:
        address = self.spec.address or os.environ.get("RAY_ADDRESS")
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                            "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
                            "OMP_NUM_THREADS": str(CPU_THREADS)}}
        if ray.is_initialized():
            return
        if address:
            ray.init(address=address, runtime_env=env, namespace=APP_NAME, log_to_driver=False)
        else:  # this host only: no dashboard; enough logical CPUs for the replicas asked for
            cpus = max(os.cpu_count() or 1, math.ceil(self.spec.max_replicas * self.spec.cpus))
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            ray.init(num_cpus=cpus, num_gpus=gpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                     runtime_env=env, namespace=APP_NAME, log_to_driver=False)
            self._own_ray = True

    def _check_room(self) -> None:
        """Serve would wait for ever for resources the cluster lacks: say so at once."""
        kind, each = ("GPU", 1.0) if self.device == "cuda" else ("CPU", self.spec.cpus)
        have = ray.cluster_resources().get(kind, 0)
        if have < self.spec.min_replicas * each:
            raise ValueError(f"--replicas {self.spec} needs {self.spec.min_replicas * each:g} {kind}s, the Ray "
                             f"cluster has {have:g}")

    def _deployment(self):
        spec = self.spec
        resources = {"num_gpus": 1} if self.device == "cuda" else {"num_cpus": spec.cpus}
        scale = (dict(autoscaling_config={"min_replicas": spec.min_replicas, "max_replicas": spec.max_replicas,
                                          "target_ongoing_requests": spec.target_runs})
                 if spec.autoscaled else dict(num_replicas=spec.min_replicas))
        return serve.deployment(ModelReplica, name=DEPLOYMENT).options(
            ray_actor_options=resources, max_ongoing_requests=MAX_ONGOING, health_check_period_s=HEALTH_CHECK_S,
            request_router_config=RequestRouterConfig(request_router_class="dg.engine.routing.PinnedRouter"),
            **scale)

    def stream(self, mode: str, inputs: dict, settings: SamplerConfig, seed: int | None, cancel: threading.Event,
               draft=None):
        """The records of one run on one replica (a `draft` goes along on the CPU); `cancel` set ends it exactly
        before the next step."""
        route = ("group", f"{os.getpid()}:{id(inputs)}")  # a race's lanes and an A/B pair share their inputs
        run_id = uuid.uuid4().hex  # unique on a cluster that several apps share
        sent = {k: v.cpu() if torch.is_tensor(v) else v for k, v in dict(inputs).items()}
        draft = None if draft is None else draft.on("cpu")
        replica, who, call = "a replica", None, None
        try:
            call, who = self._open(run_id, (mode, sent, settings, seed, draft), route)
            replica = who["name"]
            yield from self._records(call, run_id, who, cancel)
        except (ray.exceptions.RayError, RayServeException) as err:
            raise _one_line_error(err, replica) from None
        finally:
            if call is not None:
                call.cancel()  # a no-op once the call has ended
            if who is not None:
                PLACEMENT.ended(route, who["id"])

    def _open(self, run_id: str, args: tuple, route) -> tuple:
        """The run's call and the `who()` of the replica serving it. A replica that died before the run began
        (routed there before Serve saw it die) loses nothing: the run opens again on another one."""
        for attempt in range(OPEN_TRIES):
            call = self.handle.options(stream=True).stream.remote(run_id, *args, route=route)
            try:
                return call, next(call)
            except ray.exceptions.RayActorError:
                if attempt == OPEN_TRIES - 1:
                    raise

    def _records(self, call, run_id: str, who: dict, cancel: threading.Event):
        clock, stopped = time.perf_counter(), False
        for record in call:
            if cancel.is_set() and not stopped:
                self.handle.stop.remote(run_id, route=("replica", who["id"]))
                stopped = True
            if stopped and record.kind in RUN_KINDS:  # made after the stop was seen here: end before it
                yield RunEnd.before(record, time.perf_counter() - clock)
                return
            yield record
            if record.kind == "end":
                return

    def denoise(self, prompt: str, canvas_ids: list[int]) -> dict:
        try:
            return self.handle.denoise.remote(prompt, [int(i) for i in canvas_ids], route=None).result()
        except ray.exceptions.RayError as err:
            raise _one_line_error(err, "the replica") from None

    def close(self) -> None:
        """Delete the replicas; on a Ray this process started, Serve and Ray shut down too (a cluster's other
        Serve applications are left as they are)."""
        if ray.is_initialized():
            try:
                if self._own_ray:
                    serve.shutdown()
                else:
                    try:
                        serve.delete(self.app_name)
                    except RayServeException:
                        pass  # no Serve on the cluster: the start failed before it deployed
            finally:
                if self._own_ray:
                    ray.shutdown()
        self.handle, self._own_ray = None, False


@dataclass
class InReplicas(Hosted):
    """The runner (dg.engine.runner.Runner) whose model lives in Ray Serve replicas (`host`)."""

    @property
    def replicas(self) -> ServeReplicas:
        return self.host

    def describe(self) -> str:
        return f"{self.replicas.info.description}, in {self.replicas.spec} Ray Serve replicas"

    def yield_cpu(self) -> None:
        yield_threads()  # the replicas on this host keep their priority: drawing waits for the model


def start_replicas(spec: ReplicaSpec, model=None) -> InReplicas:
    """Start the replicas of `model` (as dg.loading.load takes it) and return the app's runner of them; a
    checkpoint that cannot load, or a cluster without room for the replicas, raises one line (ValueError)."""
    replicas = ServeReplicas(spec, EMBEDDED_MODEL if model is None else model)
    info = replicas.start()
    try:
        seen = load_skeleton(info.source, info.config, info.generation_config, info.sampler_config, info.dtype)
    except ValueError:
        replicas.close()
        raise
    return InReplicas(**{f.name: getattr(seen, f.name) for f in fields(Loaded)}, host=replicas)
