"""Which Ray Serve replica serves a request: a run's replica, the least-loaded one, its group's.

Serve's own router spreads requests by queue length and cannot send one to a chosen replica, but a run needs
that: its stop must reach the replica that is making its steps, the three lanes of a race and an A/B pair share
one replica (one device, as in one process), and a new run goes to the replica with the fewest open runs.
`PinnedRouter` is Serve's request router for dg's model deployment (dg.engine.replicas); it ranks replicas by
the `route` every call carries:

- `("replica", id)`: that replica (a stop, a run's other calls); the least-loaded one when it is gone;
- `("group", key)`: a run; the replica of the open runs of the same group if one is open, else the replica
  with the fewest open runs (the group then stays there while any of its runs is open);
- None: the least-loaded replica (Learn's one pass, start-up questions).

The router runs in the process that holds the handle (the app's); Serve ships its class by value, so it
reads the open runs from this module's `PLACEMENT` by importing it when it routes, where the app's runner
(dg.engine.replicas.ServeReplicas) counts them.

    python -m pytest tests/engine/test_replicas.py -q
"""

import threading
from collections import Counter

from ray.serve.request_router import RequestRouter


class Placement:
    """Open runs per replica and the replica of each open group; one per process (`PLACEMENT`). A run counts
    from the moment the router picks its replica (so runs routed at once spread), and moves if Serve sends
    it elsewhere after all."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: Counter = Counter()  # replica id -> runs routed (or being routed) there, not yet ended
        self._groups: dict = {}  # group key -> [replica id, open runs of the group]
        self._picked: dict = {}  # request id -> the replica its run was counted on while being routed

    def rank(self, replica_ids: list[str], route, request: str | None = None) -> list[str]:
        """`replica_ids` best first for `route`; a run (`request`: its id) counts on the first at once."""
        kind, key = route or (None, None)
        with self._lock:
            if kind == "replica" and key in replica_ids:
                return [key]
            group = self._groups.get(key) if kind == "group" else None
            if group is not None and group[0] in replica_ids:
                ranked = [group[0]]
            else:
                ranked = sorted(replica_ids, key=lambda r: self._open[r])
            if kind == "group" and ranked:
                self._groups[key] = [ranked[0], group[1] if group else 0]
                self._move(self._picked.pop(request, None), ranked[0])
                self._picked[request] = ranked[0]
            return ranked

    def routed(self, route, replica_id: str, request: str | None = None) -> None:
        """A run (a `("group", key)` call) went to `replica_id`."""
        kind, key = route or (None, None)
        if kind != "group":
            return
        with self._lock:
            self._move(self._picked.pop(request, None), replica_id)
            group = self._groups.setdefault(key, [replica_id, 0])
            group[0], group[1] = replica_id, group[1] + 1

    def _move(self, counted: str | None, replica_id: str | None) -> None:
        if counted is not None:
            self._open[counted] -= 1
        if replica_id is not None:
            self._open[replica_id] += 1

    def ended(self, route, replica_id: str) -> None:
        """A run routed to `replica_id` ended (finished, stopped, failed or lost with its replica)."""
        kind, key = route or (None, None)
        with self._lock:
            self._open[replica_id] -= 1
            if self._open[replica_id] <= 0:
                del self._open[replica_id]
            group = self._groups.get(key) if kind == "group" else None
            if group is not None:
                group[1] -= 1
                if group[1] <= 0:
                    del self._groups[key]

    def load(self) -> dict[str, int]:
        """Open runs per replica id (for tests and the benchmark)."""
        with self._lock:
            return {r: n for r, n in self._open.items() if n > 0}


PLACEMENT = Placement()


class PinnedRouter(RequestRouter):
    """Serve's request router for dg's model replicas: the ranking of `Placement`."""

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        from dg.engine.routing import PLACEMENT  # this module's, not the copy Serve shipped with the class

        route, request = None, None
        if pending_request is not None:
            route, request = pending_request.kwargs.get("route"), pending_request.metadata.internal_request_id
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        ranked = PLACEMENT.rank(list(by_id), route, request)
        return [[by_id[ranked[0]]], [by_id[r] for r in ranked[1:]]] if ranked else []

    def on_request_routed(self, pending_request, replica_id, result) -> None:
        from dg.engine.routing import PLACEMENT

        PLACEMENT.routed(pending_request.kwargs.get("route"), replica_id.unique_id,
                         pending_request.metadata.internal_request_id)
