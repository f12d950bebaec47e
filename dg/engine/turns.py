"""Fair turns on one model: live runs of every session share it step by step, each within a budget.

A run first waits in line for one of `slots` places; the next place goes to the waiting run whose session has
the fewest runs placed, then to the earliest. Placed runs take the model in turns, one step (a denoising step,
or one AR token) per turn, in round-robin order: a long run slows a short one but never stalls it. Turns are
per model: a run served by one of several replicas (dg.engine.replicas) takes turns with the runs on its
replica only, once its first record says which replica that is. A seeded run keeps its own copy of torch's RNG
state and puts it back at each of its turns, so its draws are those it makes alone after
`torch.manual_seed(seed)` (the same tokens as `model.generate()`) however runs interleave. A run that has held
the model for `budget.model_s` seconds or `budget.steps` steps is stopped between two steps and keeps what it
made. A run whose cancel event is set while it waits leaves the line without running.

    python -m pytest tests/engine/test_turns.py -q
"""

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass

import torch

PLACE_POLL_S = 0.5  # a waiting run re-reads its cancel event this often


@dataclass(frozen=True)
class Budget:
    """What one run may take of the model: seconds holding it, and steps (or AR tokens)."""

    model_s: float = 60.0
    steps: int = 8192


class Ticket:
    """A run's place in the scheduler: its session, its RNG state while others hold the model, its use."""

    _arrivals = itertools.count()

    def __init__(self, seed: int | None, cancel: threading.Event, group: object = None):
        self.seed, self.cancel, self.group = seed, cancel, group
        self.session = ""  # set by the UI once it registers the run; fairness reads it on every pick
        self.model: object = None  # whose turns it takes: None, the one model; else a replica's name
        self._held: object = None  # the model whose turn it holds (or waits for)
        self.arrival = next(self._arrivals)
        self.model_s, self.steps = 0.0, 0
        self.over_budget: str | None = None
        self._rng: tuple | None = None
        self._since = 0.0  # when this run last took the model

    def save_rng(self) -> None:
        if self.seed is not None:
            cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
            self._rng = (torch.get_rng_state(), cuda)

    def restore_rng(self) -> None:
        if self._rng is not None:
            cpu, cuda = self._rng
            torch.set_rng_state(cpu)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
        elif self.seed is not None:
            torch.manual_seed(self.seed)  # the first turn: right before the run's first draw


class Turns:
    """The line, the placed runs and the turn order; one per process (`TURNS`)."""

    def __init__(self, slots: int = 4, budget: Budget = Budget()):
        self.slots, self.budget = slots, budget
        self._cond = threading.Condition()
        self._waiting: list[Ticket] = []
        self._placed: list[Ticket] = []
        self._turns: dict[object, deque[Ticket]] = {}  # per model: placed runs that want it, in turn order
        self._holders: dict[object, Ticket] = {}  # per model: the run holding it

    # -- the line --------------------------------------------------------------------------------
    def place(self, ticket: Ticket) -> bool:
        """Wait for a place; False when the run was cancelled while it waited."""
        with self._cond:
            self._waiting.append(ticket)
            while not ticket.cancel.is_set() and not self._may_place(ticket):
                self._cond.wait(PLACE_POLL_S)
            self._waiting.remove(ticket)
            if ticket.cancel.is_set():
                self._cond.notify_all()
                return False
            self._placed.append(ticket)
            self._cond.notify_all()
            return True

    def _may_place(self, ticket: Ticket) -> bool:
        if ticket.group is not None and any(t.group is ticket.group for t in self._placed):
            return True  # a race's later lanes join its first: every lane starts together
        return len(self._placed) < self.slots and self._next_in_line() is ticket

    def _line(self) -> list[Ticket]:
        """The waiting runs in the order they get a place: fewest runs of their session placed, then earliest."""
        placed = [t.session for t in self._placed]
        return sorted(self._waiting, key=lambda t: (placed.count(t.session), t.arrival))

    def _next_in_line(self) -> Ticket | None:
        return next(iter(self._line()), None)

    def position(self, ticket: Ticket) -> int | None:
        """1 for the next run to be placed, 2 for the one after, …; None once placed (or not waiting)."""
        with self._cond:
            if ticket not in self._waiting:
                return None
            return self._line().index(ticket) + 1

    def leave(self, ticket: Ticket) -> None:
        """The run ended: give back its place and, if it holds it, the model."""
        with self._cond:
            self._release(ticket)
            if ticket in self._turns.get(ticket._held, ()):
                self._turns[ticket._held].remove(ticket)
            if ticket in self._placed:
                self._placed.remove(ticket)
            self._cond.notify_all()

    # -- turns on the model ----------------------------------------------------------------------
    def take(self, ticket: Ticket) -> None:
        """Wait for this placed run's turn on its model, then put its RNG state in place."""
        with self._cond:
            ticket._held = ticket.model
            line = self._turns.setdefault(ticket.model, deque())
            line.append(ticket)
            while not (ticket.model not in self._holders and line[0] is ticket):
                self._cond.wait()
            line.popleft()
            self._holders[ticket.model] = ticket
        ticket.restore_rng()
        ticket._since = time.perf_counter()

    def _release(self, ticket: Ticket) -> None:
        if self._holders.get(ticket._held) is ticket:
            del self._holders[ticket._held]

    def step_done(self, ticket: Ticket, counted: bool = True) -> None:
        """A record made (`counted`: a step or an AR token): count it against the budget (stopping the
        run past it), and hand the model to the next run in turn if one waits (this run then waits
        for its next turn). A run whose `model` changed (its replica is known) moves to that model's turns."""
        ticket.model_s += time.perf_counter() - ticket._since
        ticket.steps += counted
        if ticket.over_budget is None and (ticket.model_s > self.budget.model_s or ticket.steps >= self.budget.steps):
            ticket.over_budget = (f"{ticket.model_s:.1f} s of model time" if ticket.model_s > self.budget.model_s
                                  else f"{ticket.steps} steps")
            ticket.cancel.set()
        with self._cond:
            if ticket.model == ticket._held and not self._turns.get(ticket._held):
                ticket._since = time.perf_counter()
                return  # nobody else waits: keep the model (and the RNG state in place)
            ticket.save_rng()
            self._release(ticket)
            self._cond.notify_all()
        self.take(ticket)

    def load(self) -> dict:
        """How many runs are placed and waiting (for tests and the status line)."""
        with self._cond:
            return {"placed": len(self._placed), "waiting": len(self._waiting)}


TURNS = Turns()
