"""Gradio glue every tab shares: the session's state, the one streaming helper, input errors, API names.

`stream` is the skeleton of every live handler (Generate, A/B, Race): it registers the session's runs
(so Stop reaches them), yields only the views that changed since the last frame, stops the runs if
the page goes away, and tells the user when a run failed or was stopped.

    python -m pytest tests/ui/test_app.py -q
"""

import functools
import inspect
import logging
import math
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from dg.config import KNOBS
from dg.engine import runs
from dg.ui.pace import Pace, SlowMotion
from dg.engine.runs import DEFAULT_FPS, LiveRun, Sessions, awatch, prepare_run
from dg.ui.kept import History
from dg.prompts import open_image
from dg.examples import EXAMPLES_DIR, load_rows

RUN_TIMEOUT_S = 120.0  # a run a Learn button starts and waits for: at most this long for its turn and its steps
RUNS_TTL_S = 6 * 3600  # a session's replays are dropped this long after its last change
KNOB_NAMES = [k.name for k in KNOBS]
PICKER_INFO = "every run of this session keeps its replay"
LIVE_INFO = "● a run is playing: it is kept here when it ends"
LOG = logging.getLogger("dg.ui")


def load_examples(folder: Path = EXAMPLES_DIR) -> dict[str, list]:
    """examples.json as Gradio example rows: [prompt, image path or None, thinking] per group (the skill
    and reference answer that follow in the file are for checking replies)."""
    return {name: [[r.prompt, str(folder / r.image) if r.image else None, r.thinking] for r in rows]
            for name, rows in load_rows(folder).items()}


@dataclass
class RunState:
    """What every tab shares: this session's finished runs (a gr.State) and the live runs of all sessions."""

    history: gr.State
    sessions: Sessions

    @classmethod
    def create(cls) -> "RunState":
        return cls(gr.State(History(), time_to_live=RUNS_TTL_S), Sessions())

    def stop(self, request: gr.Request) -> str:
        """The Stop buttons: cancel every run of the session that clicked; with none going, the status stays as
        it is (a finished run's summary is not replaced)."""
        n = self.sessions.stop(session_id(request))
        return "Stopping… what was produced so far stays in the replay." if n else gr.skip()


@dataclass
class Picks:
    """The views that follow the run picker (the edit panel, the Learn walkthrough, the verify round), answered by
    one listener. Gradio's page holds back a `change` that comes while its listener still runs and, when that
    listener ends, says the `change` again to *every* listener of the picker: with several, each one ending
    re-sends the others, and they go on re-sending each other with no pick at all, in a queue that delays every
    other reply of the session. One listener can only re-send itself, once."""

    picker: gr.Dropdown
    views: list = field(default_factory=list)  # (fn, inputs, outputs) per view, in the order they were added

    def follow(self, fn: Callable, inputs: list, outputs: list) -> None:
        """Have `fn(*inputs)` answer each pick with its `outputs` (a tuple of them, or one gr.skip() for all)."""
        taken = {id(c) for _, _, outs in self.views for c in outs}
        assert not taken & {id(c) for c in outputs}, "two views that follow the picker fill one component"
        self.views.append((fn, list(inputs), list(outputs)))

    def wire(self) -> None:
        """The one `change` listener of the picker (call once, after every view is added)."""
        inputs = list({id(c): c for _, ins, _ in self.views for c in ins}.values())
        outputs = [c for _, _, outs in self.views for c in outs]
        where = {id(c): i for i, c in enumerate(inputs)}

        def on_pick(*values):
            update = {}
            for fn, ins, outs in self.views:
                result = fn(*(values[where[id(c)]] for c in ins))
                if len(outs) == 1:
                    result = (result,)
                elif not isinstance(result, tuple):  # one skip for all of the view's outputs
                    continue
                update.update(zip(outs, result))
            return update or gr.skip()  # Gradio reads an empty dict as too few outputs: an error in the page

        self.picker.change(on_pick, inputs, outputs, api_visibility="private", show_progress="hidden")


UNREADABLE = {"InvalidPathError": "only files uploaded to this app can be used",
              "ValidationError": "a file input takes an uploaded file"}


def guard_inputs(demo: gr.Blocks) -> gr.Blocks:
    """An API client can send any JSON for any input: a value a component cannot read (a word for a
    slider, a list for a number) and a NaN or infinity become a one-line message naming the input,
    before any handler runs. Gradio's own messages (out of range, not a choice) pass unchanged."""
    preprocess = demo.preprocess_data

    async def checked(block_fn, inputs, state, explicit_call=False):
        try:
            values = await preprocess(block_fn, inputs, state, explicit_call)
        except gr.Error as err:  # Gradio's own message, logged as one line
            raise refusal(err.message, err.title) from None
        except Exception as err:  # Gradio's ComponentProcessingError, a file model's ValidationError, …
            at = re.search(r"at index (\d+)", str(err))
            name = _label(block_fn.inputs[int(at.group(1))]) if at else "an input"
            why = next((ln for ln in str(err).splitlines() if ln.startswith("Expected")), None)
            why = why or UNREADABLE.get(type(err).__name__) or (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise refusal(f"{name} cannot take that value: {why[:200]}") from None
        for block, value in zip(block_fn.inputs, values):
            if isinstance(value, float) and not math.isfinite(value):
                raise refusal(f"{_label(block)} must be a finite number, got {value}")
        return values

    demo.preprocess_data = checked
    return _guard_events(demo)


def _guard_events(demo: gr.Blocks) -> gr.Blocks:
    """A raw request to the queue may name an event that does not exist (an `fn_index` no listener has):
    Gradio's queue refuses a missing index with HTTP 400 but looks an unknown one up unchecked (a KeyError,
    HTTP 500 and a traceback). Refused here on the queue's own path: HTTP 400, a one-line body and one log line."""
    queue = demo._queue
    push = queue.push

    async def checked(body, request, username):
        if body.fn_index is not None:
            fns = demo.state_holder[body.session_hash].blocks_config.fns if body.session_hash else demo.fns
            if body.fn_index not in fns:
                message = f"no event has fn_index {body.fn_index}"
                LOG.warning("refused: %s", message)
                return False, message, "error"
        return await push(body=body, request=request, username=username)

    queue.push = checked
    return demo


def _label(block) -> str:
    return getattr(block, "label", None) or block.get_block_name()


def session_id(request) -> str:
    return request.session_hash if request is not None else ""


def refusal(message: str, title: str = "Can't run that") -> gr.Error:
    """A user's mistake: a message in the page and one line in the server's log, not a traceback."""
    LOG.warning("refused: %s", message)
    return gr.Error(message, title=title, print_exception=False)


@contextmanager
def refused_input():
    """A ValueError from validating what the user set becomes a message in the page, not a traceback."""
    try:
        yield
    except (ValueError, TypeError) as err:
        raise refusal(str(err)) from None


def budget_limit(model) -> int:
    """The largest token budget the model's positions hold beside a prompt (at least one token), in whole
    canvases as `dg.prompts.check_inputs` counts them: the token-budget slider's maximum."""
    limit = model.config.get_text_config().max_position_embeddings
    canvas = model.config.canvas_length
    return (limit - 1) // canvas * canvas if limit is not None else None


def open_upload(path):
    """An uploaded picture (`dg.prompts.open_image`), or a one-line ValueError naming the file by its own
    name, never by the server's temp path: "that file is not an image (notes.png): cannot identify image file"."""
    try:
        return open_image(path)
    except ValueError as err:
        path, name = str(path), os.path.basename(str(path))
        why = err.__context__  # PIL's own error, which names the path again
        if str(err).startswith("not an image") and why is not None:
            reason = str(why).replace(f"'{path}'", "").replace(path, "").strip().splitlines()[0]
            raise ValueError(f"that file is not an image ({name}): {reason}") from None
        raise ValueError(str(err).replace(path, name).splitlines()[0]) from None


def prepare(runner, prompt, image, thinking, seed, knobs) -> tuple:
    """`dg.engine.runs.prepare_run` on the sliders' values, in order of `KNOBS`; bad input → gr.Error."""
    with refused_input():
        picture = open_upload(image) if image else None
        return prepare_run(runner, prompt, picture, thinking, seed, dict(zip(KNOB_NAMES, knobs)))


def with_knob(runner, inputs, config, knob, value):
    """`dg.engine.runs.with_knob`: A/B's B config, held to the knob ranges and the context check; bad input → gr.Error."""
    with refused_input():
        return runs.with_knob(runner, inputs, config, knob, value)


async def stream(shared: RunState, request, live_runs: list[LiveRun], draw: Callable[..., dict],
                 fps: float = DEFAULT_FPS, stays_stoppable: tuple[LiveRun, ...] = ()) -> AsyncIterator[dict]:
    """Yield `draw(*snapshots)` as the started `live_runs` progress, each update only the views that changed.

    `stays_stoppable` are handles registered with the runs and left registered after them (the caller discards
    them): what the action does next, such as a slow-motion tail, stays stoppable without a gap."""
    with refused_input():  # one live action per session
        shared.sessions.add(session_id(request), *live_runs, *stays_stoppable)
    shown = {}  # what the page already has: unchanged views are not sent again
    try:
        async for frames in awatch(live_runs, fps):
            views = draw(*frames)
            update = {c: v for c, v in views.items() if shown.get(c) != v}
            # nothing new: a no-op update all the same, so at each heartbeat Gradio learns whether the
            # page is still there (an empty dict would read as one missing output)
            yield update or {next(iter(views)): gr.skip()}
            shown = views
    finally:
        for run in live_runs:
            run.stop()  # the page went away or the runs ended: stop sampling either way
        shared.sessions.discard(session_id(request), *live_runs)
    for run in live_runs:
        notify(run)


async def paced_stream(shared: RunState, request, run: LiveRun, draw: Callable[..., dict],
                       pace_ms) -> AsyncIterator[dict]:
    """`stream` of one run in slow motion: `draw(frame, index, pace)` shows step `index` of the frame (None: the
    step `pace` says is due); once the sampler has ended, the steps the view still owes, each at its time."""
    with refused_input():
        pace = Pace(pace_ms or 0)

    async def tail(traces, stop):
        (trace,) = traces
        async for index in pace.tail(len(trace.steps), stop):
            yield draw(trace, index, pace)

    async for update in held_back(shared, request, [run], lambda frame: draw(frame, None, pace), pace.seconds > 0,
                                  tail):
        yield update


async def slowed_stream(shared: RunState, request, live_runs: list[LiveRun], draw: Callable[..., dict],
                        motion: SlowMotion) -> AsyncIterator[dict]:
    """`stream` of runs that race, `motion` times slower: `draw(*frames)` of the lanes at the race time shown;
    once every lane has ended, the rest of the race at its pace."""
    async def tail(traces, stop):
        async for _ in motion.tail(traces, stop):
            yield draw(*(motion.at(trace) for trace in traces))

    async for update in held_back(shared, request, live_runs, lambda *frames: draw(*map(motion.at, frames)),
                                  motion.slowed, tail):
        yield update


async def held_back(shared: RunState, request, live_runs: list[LiveRun], draw: Callable[..., dict], slowed: bool,
                    tail: Callable[..., AsyncIterator[dict]]) -> AsyncIterator[dict]:
    """`stream` of runs whose drawing lags them: once they have ended, `tail(traces, stop)` yields the frames the
    view still owes, unless a run was stopped or Stop came (the tail stays stoppable without a gap)."""
    handle = LiveRun(lambda emit, cancel: None, label="slow motion")  # never started: a handle for Stop
    try:
        async for update in stream(shared, request, live_runs, draw, stays_stoppable=(handle,) if slowed else ()):
            yield update
        traces = [run.snapshot() for run in live_runs]
        if slowed and not handle.cancel.is_set() and not any(trace.cancelled for trace in traces):
            async for update in tail(traces, handle.cancel):
                yield update
    finally:
        shared.sessions.discard(session_id(request), handle)


def notify(run: LiveRun) -> None:
    if run.error:
        gr.Warning(f"The run failed: {run.error}. What it produced so far is kept.")
    elif run.over_budget:
        gr.Info(f"Stopped at the run's budget ({run.over_budget}), so other users get their turn; the partial "
                "run is kept.")
    elif run.trace.cancelled:
        gr.Info(f"Stopped after {len(run.trace.steps or run.trace.tokens)} steps; the partial run is kept.")


def step_index(trace, step) -> int:
    """A slider's 1-based run step (any number a client sends) as an index into `trace.steps`, clamped."""
    return min(max(int(step or 1), 1), len(trace.steps)) - 1


def picker(history: History, select: bool = True) -> gr.Dropdown:
    """The run picker listing the history, open for picking; `select` shows the newest (else the shown run stays
    selected)."""
    labels = history.labels
    picked = {"value": labels[-1]} if select and labels else {}
    return gr.Dropdown(labels, interactive=True, info=PICKER_INFO, **picked)


def live_picker(history: History) -> gr.Dropdown:
    """The run picker while a run plays: no kept run picked, held and saying so until the live run is kept."""
    return gr.Dropdown(history.labels, value=None, interactive=False, info=LIVE_INFO)


def unless_live(listener: Callable) -> Callable:
    """A run picker's listener `(history, label, …)` that leaves its views as they are while no run is picked (a
    run is playing, or none was kept): they show what they showed until the live run is kept and picked."""
    @functools.wraps(listener)
    def listen(history, label, *rest):
        return gr.skip() if label is None else listener(history, label, *rest)
    return listen


def shows_run(title: str, label: str) -> bool:
    """Whether a view's title (headed "**label** · …") already shows the run of this label: the page may say a
    pick again without one, and the view then stays as it is."""
    return title.startswith(f"**{label}**")


def named_inputs(fn, inputs: dict) -> tuple:
    """A listener on `inputs` (API name → component, in the order `fn(*values, request=...)` reads them): the
    async generator Gradio calls, with one parameter per input so that the API names each one, and the
    components to wire it to. Names and components come from the one dict, so they cannot fall out of step."""

    async def with_names(*args):
        *values, request = args
        async for update in fn(*values, request=request):
            yield update

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(n, kind) for n in inputs]
    with_names.__signature__ = inspect.Signature([*params, inspect.Parameter("request", kind, default=None,
                                                                             annotation=gr.Request)])
    with_names.__annotations__ = {"request": gr.Request}  # Gradio finds the request parameter by its type hint
    return with_names, list(inputs.values())
