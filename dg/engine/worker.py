"""The model in a worker process: one child holds the weights and serves every live run's records.

In the app's process the sampler thread and the event loop share one GIL, and the loop holds it for
Gradio's per-frame work while the sampler's many small torch ops each wait to take it back (the UI made
generation ~30 % slower). So the model lives in one child process (multiprocessing "spawn") that serves
every run of every session over a pipe, one request at a time: open a run (any mode of
dg.modes.stream_mode, on CPU inputs moved to the model's device there), its next record, close it,
and Learn's one-pass prediction. `InWorker` is the runner (dg.engine.runner.Runner) whose model lives there.
The app's process keeps the line, the turns, the budgets, the sessions and the drawing (dg.engine.turns,
dg.engine.runs): a live run's thread asks the child for one record per turn. Between requests the child
makes each open run's next records ahead (up to `AHEAD`, `_Run`), so the model works while the app
draws; and `python app.py` makes its own threads nicer than the child (`InWorker.yield_cpu`), so on busy cores the
drawing waits for the sampler.

Seeds stay exact: the child gives each seeded run the RNG discipline of dg.engine.turns (`Ticket`: seeded
right before its first record, its RNG state put back before each next one and kept after it), so a
seed makes the tokens of a headless run after `torch.manual_seed(seed)` however runs interleave. Stop
and budgets too: each request carries the run's cancel flag, and the run's own generator ends with its
"cancelled" RunEnd between two steps, as in-process.

The app's process never holds the weights (a second copy of a 52 GB model does not fit): `start_worker`
builds the model on the meta device from the child's config, for what the UI reads (vocabulary, canvas
length, generation config, the context check). A child that dies fails the runs it was serving with one
clear message (their partial traces kept) and the next run starts a fresh child. The child ends when
it is closed, when the app exits, and when the app dies (its end of the pipe closes).

    python -m dg.bench.worker [--model DIR] [--prompt "What is 487 + 356?"] [--repeats 5]   # cost per record
"""

import builtins
import concurrent.futures
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, fields

import torch

from dg.config import SamplerConfig
from dg.engine.memory import trim
from dg import modes
from dg.engine.runner import Hosted
from dg.engine.turns import Ticket
from dg.devices import share_cpu
from dg.loading import EMBEDDED_MODEL, Loaded, load, load_skeleton
from dg.denoise import denoise_once
from dg.trace import RunEnd

POLL_S = 0.5  # while waiting for a reply, check this often that the child is still alive
CLOSE_S = 10.0  # a closed child gets this long to exit before it is terminated
# the app's threads run this much nicer than the model process: when the cores are all busy (a laptop,
# many viewers), drawing frames waits for the sampler, not the other way round
APP_NICE = 5
# records the child makes ahead per open run: enough to ride out the app's slower moments (a frame drawn,
# a garbage collection) at the price of at most this many steps computed for nothing when a run is stopped
AHEAD = 4
LOG = logging.getLogger("dg.engine")


class HostDied(RuntimeError):
    """The model process ended while a run was using it (killed, out of memory, crashed)."""


@dataclass
class HostInfo:
    """What the child loaded: for the app's meta-device model and its title line."""

    source: str
    description: str
    config: object  # DiffusionGemmaConfig
    generation_config: object
    sampler_config: SamplerConfig
    dtype: torch.dtype


# -- the child ---------------------------------------------------------------------------------------
class _Run:
    """One run in the child: its record generator, its cancel event, its RNG state (a Ticket's) and the
    records made ahead of their requests (at most `AHEAD` of them).

    While no request waits on the pipe, the child makes each open run's next records ahead of time, so
    the model does not idle while the app draws the last one or is slow to ask for the next. A step (or
    AR token) made ahead is dropped, with every record made after it, when the request that asks for it
    says the run was stopped: the run then ends as it would have, "cancelled" before that step, with the
    same records and counts (the cancel check sits before each step). Records that come whatever the
    stop (a canvas's commit, the end of a finished run) are delivered as made.
    """

    def __init__(self, records, cancel: threading.Event, seed: int | None):
        self.records, self.cancel, self.rng = records, cancel, Ticket(seed, cancel)
        # each made record as (record or None at the end,) or (None, the exception it raised)
        self.ahead: deque[tuple] = deque()
        self.clock, self.finished = time.perf_counter(), False

    def _make(self):
        self.rng.restore_rng()  # torch.manual_seed(seed) before the first record, else the state it left
        try:
            return next(self.records, None)
        finally:
            self.rng.save_rng()

    def wants_ahead(self) -> bool:
        if self.finished or self.cancel.is_set() or len(self.ahead) >= AHEAD:
            return False
        if not self.ahead:
            return True
        last = self.ahead[-1]
        return len(last) == 1 and last[0] is not None and last[0].kind != "end"  # the generator goes on

    def make_ahead(self) -> None:
        try:
            self.ahead.append((self._make(),))
        except Exception as err:  # the run's own failure: raised when its record is asked for
            self.ahead.append((None, err))

    def next(self, cancelled: bool):
        if cancelled:
            self.cancel.set()  # the generator ends with its "cancelled" RunEnd between two steps
        cancelled = self.cancel.is_set()  # stopped by this request or an earlier one
        if not self.ahead:
            record = self._make()
        else:
            made = self.ahead.popleft()
            if len(made) == 2:
                raise made[1]
            record = made[0]
            if cancelled and record is not None and record.kind in ("step", "token", "round"):
                self.ahead.clear()
                record = self._ended_before(record)
        if record is None or record.kind == "end":
            self.finished = True
        return record

    def _ended_before(self, dropped) -> RunEnd:
        """The "cancelled" end the run's generator gives when its stop is seen before `dropped`."""
        self.records.close()
        return RunEnd.before(dropped, time.perf_counter() - self.clock)


def _open(loaded, runs, run_id, mode, inputs, settings, seed, draft=None):
    inputs = {k: v.to(loaded.device) if torch.is_tensor(v) else v for k, v in inputs.items()}
    cancel = threading.Event()
    records = modes.stream_mode(loaded.model, mode, inputs, settings, cancel=cancel, draft=draft, path=loaded.path)
    runs[run_id] = _Run(records, cancel, seed)


def _next(loaded, runs, run_id, cancelled):
    record = runs[run_id].next(cancelled)
    if record is None or record.kind == "end":
        _close_run(loaded, runs, run_id)  # the last record: the app asks no more
    return record


def _close_run(loaded, runs, run_id):
    run = runs.pop(run_id, None)
    if run is not None:
        run.records.close()
        trim()  # what the run freed goes back to the system, as in-process


def _denoise_once(loaded, runs, prompt, canvas_ids):
    return denoise_once(loaded.model, loaded.processor, prompt, canvas_ids)


HANDLERS = {"open": _open, "next": _next, "close": _close_run, "denoise": _denoise_once,
            "ping": lambda loaded, runs: None}


def _send(conn, message) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))  # plain pickle: no shared memory


def _failure(err: BaseException) -> tuple:
    return ("error", type(err).__name__, str(err))


def _work_ahead(conn, runs: dict) -> None:
    """Until a request arrives, make the open runs' next records, one per run in turn, up to `AHEAD` each."""
    while True:
        waiting = [run for run in list(runs.values()) if run.wants_ahead()]
        if not waiting:
            return
        for run in waiting:
            if conn.poll(0):
                return
            run.make_ahead()


def _serve(conn, source, device, path: str = "auto") -> None:
    """The child's loop: load the model, report what it loaded (or why it could not), then answer
    requests until told to exit or until the app's end of the pipe closes (the app exited or died)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the app closes us
    try:
        loaded = load(source, device, path=path)
        share_cpu(loaded.device)
        model = loaded.model
        reply = ("ok", HostInfo(loaded.source, loaded.describe(), model.config, model.generation_config,
                                loaded.sampler_config, loaded.dtype))
    except Exception as err:  # the same one-line error as an in-process load
        loaded, reply = None, _failure(err)
    runs: dict[int, _Run] = {}
    while True:  # send the last reply, take the next request
        try:
            _send(conn, reply)
            if loaded is None:
                return
            _work_ahead(conn, runs)
            op, *args = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return  # the app is gone
        if op == "exit":
            return
        try:
            reply = ("ok", HANDLERS[op](loaded, runs, *args))
        except Exception as err:  # a run's own failure: reported to its LiveRun, the child serves on
            reply = _failure(err)
            if op == "next":
                runs.pop(args[0], None)


# -- the app's side ----------------------------------------------------------------------------------
def _raise(name: str, message: str):
    """The child's exception again: a builtin one as itself, another as a RuntimeError of the same name."""
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(name, (RuntimeError,), {})
    raise cls(message)


class WorkerProcess:
    """The one worker process holding the model; every request is one reply, under one lock."""

    def __init__(self, source, device=None, path: str = "auto"):
        self.source, self.device = str(source), None if device is None else str(device)
        self.path = path  # dg.loading.load's: how every run passes through the model (dg.paths)
        self.info: HostInfo | None = None
        self._lock = threading.Lock()
        self._proc = self._conn = None
        self._generation = 0  # which child a run was opened on: runs never outlive theirs
        self._ids = itertools.count()
        # children are spawned from this one thread: a child inherits its spawner's priority, and the
        # app's other threads may since have yielded theirs (yield_cpu)
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dg-spawn")
        self._spawner_tid = self._spawner.submit(threading.get_native_id).result()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def start(self) -> HostInfo:
        """Spawn the child and wait until it has loaded the model; its loading error is raised here."""
        with self._lock:
            return self._start()

    def _start(self) -> HostInfo:
        self._stop()
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(theirs, self.source, self.device, self.path), name="dg-model",
                           daemon=True)
        self._spawner.submit(proc.start).result()
        theirs.close()  # only the child holds its end now: when it dies, our reads see EOF
        self._proc, self._conn = proc, ours
        self._generation += 1
        try:
            self.info = self._reply()
        except BaseException:
            self._stop()
            raise
        return self.info

    def _reply(self):
        proc, conn = self._proc, self._conn
        try:
            while not conn.poll(POLL_S):
                if not proc.is_alive():
                    raise EOFError
            status, *payload = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            proc.join(1.0)
            code = proc.exitcode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited (code {code})"
            raise HostDied(f"the model process {how}; the next run starts a fresh one") from None
        if status == "error":
            _raise(*payload)
        return payload[0]

    def _call(self, op: str, *args, generation: int | None = None, restart: bool = False):
        """One request and its reply; (reply, the child's generation). `generation`: the request belongs to
        a run opened on that child, which must still be the one running; `restart`: a dead child is
        replaced first (a new run, a Learn prediction)."""
        with self._lock:
            if generation is not None and generation != self._generation:
                raise HostDied("the model process was restarted; this run cannot go on")
            if not self.alive():
                if not restart:
                    raise HostDied("the model process is not running; the next run starts a fresh one")
                LOG.warning("the model process is not running: starting a fresh one")
                self._start()
            try:
                _send(self._conn, (op, *args))
            except OSError:
                pass  # the child is gone: the reply says how
            return self._reply(), self._generation

    def stream(self, mode: str, inputs: dict, settings: SamplerConfig, seed: int | None, cancel: threading.Event,
               draft=None):
        """Records of one run served by the child, as dg.modes.stream_mode gives them there (a `draft`
        goes along on the CPU); `cancel` set ends it with its "cancelled" RunEnd between two steps."""
        run_id = next(self._ids)
        inputs = {k: v.cpu() if torch.is_tensor(v) else v for k, v in dict(inputs).items()}
        draft = None if draft is None else draft.on("cpu")
        _, generation = self._call("open", run_id, mode, inputs, settings, seed, draft, restart=True)
        done = False
        try:
            while True:
                record, _ = self._call("next", run_id, cancel.is_set(), generation=generation)
                done = record is None or record.kind == "end"
                if record is not None:
                    yield record
                if done:
                    return
        except HostDied:
            done = True  # nothing left to close
            raise
        finally:
            if not done:  # closed early (the page went away, an error in the app): end it in the child too
                try:
                    self._call("close", run_id, generation=generation)
                except HostDied:
                    pass

    def denoise(self, prompt: str, canvas_ids: list[int]) -> dict:
        """Learn's one decoder pass (dg.denoise.denoise_once) on the child's model."""
        return self._call("denoise", prompt, [int(i) for i in canvas_ids], restart=True)[0]

    def yield_cpu(self, increment: int = APP_NICE) -> None:
        """Make every thread of this (the app's) process but the spawner `increment` nicer, and so the
        threads they start later: the model process keeps its priority, so on busy cores the drawing
        waits for the sampler, not the other way round (`yield_threads`)."""
        yield_threads(increment, spare=self._spawner_tid)

    def close(self) -> None:
        """Ask the child to exit; terminate it if it does not within CLOSE_S."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            _send(conn, ("exit",))
        except OSError:
            pass  # it is gone already
        proc.join(CLOSE_S)
        if proc.is_alive():
            proc.terminate()
            proc.join(CLOSE_S)
        conn.close()


def yield_threads(increment: int = APP_NICE, spare: int | None = None) -> None:
    """Make every thread of this process but `spare` (a native thread id) `increment` nicer, and so the threads
    they start later. Linux sets a priority per thread; where there is no /proc/self/task, the calling
    thread's; Windows has no nice levels."""
    if not hasattr(os, "setpriority") or increment <= 0:
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        if tid == spare:
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + increment))
        except OSError:
            pass  # a thread that ended meanwhile


@dataclass
class InWorker(Hosted):
    """The runner (dg.engine.runner.Runner) whose model lives in a WorkerProcess (`host`)."""

    @property
    def worker(self) -> WorkerProcess:
        return self.host

    def describe(self) -> str:
        return f"{self.worker.info.description}, in a worker process"

    def yield_cpu(self) -> None:
        self.worker.yield_cpu()


def start_worker(model=None, device=None, path: str = "auto") -> InWorker:
    """Start the worker process on `model` (`model`, `device`, `path` as dg.loading.load takes them) and
    return the app's runner of it;
    a checkpoint that cannot load raises the error dg.loading.load raises."""
    worker = WorkerProcess(EMBEDDED_MODEL if model is None else model, device, path)
    info = worker.start()
    try:
        seen = load_skeleton(info.source, info.config, info.generation_config, info.sampler_config, info.dtype)
    except ValueError:
        worker.close()
        raise
    return InWorker(**{f.name: getattr(seen, f.name) for f in fields(Loaded)}, host=worker)
