"""The Generate tab: prompt, mode (diffusion / hybrid / AR) and settings, the live canvas, the replay and
inspector, A/B, plots.

A run streams into the canvas while it denoises (dg.engine.runs in a background thread), at the pace the
presenter set (dg.ui.pace: the sampler keeps its speed, the drawing slows down); when it ends it joins
the session's history, the replay slider (run steps 1 … N, as every label counts) and the run picker
reach every step of it, a skill example's reply is checked against its reference answer, and a
chained event draws its four plots.

    python app.py   # then the Generate tab
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import gradio as gr

from dg.config import KNOBS
from dg.trace import Trace
from dg.ui import edit_panel
from dg.ui import modes
from dg.ui.common import (KNOB_NAMES, PICKER_INFO, Picks, RunState, budget_limit, live_picker, load_examples,
                          open_upload, paced_stream, picker, prepare, refused_input, step_index, stream, unless_live,
                          named_inputs, with_knob)
from dg.examples import SkillExamples
from dg.examples import skill_of
from dg.ui.pace import MAX_PACE_MS, Pace
from dg.engine.runs import LiveRun, waiting_message
from dg.ui.files import scratch_dir
from dg.ui.kept import KeptRun
from dg.view import export, notes, plots, render
from dg.view.tables import compare_table, summary
from dg.view.theme import CSS

REPLAY = "Replay: run step (all canvases in order, from 1)"
LIVE_REPLAY = "Replay: once the run now playing ends"
PLAY_INTERVAL_S = 0.125  # replay speed: eight steps a second
PLAY, PAUSE = "▶ Play", "❚❚ Pause"  # glyphs every common font has (⏸ is missing from Debian's)
# Clicking a canvas cell writes its data-pos into the inspector's position box.
CLICK_JS = """element.addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pos]');
  const box = document.querySelector('#dg-pos input');
  if (!cell || !box) return;
  box.value = cell.dataset.pos;
  box.dispatchEvent(new Event('input', {bubbles: true}));
});"""
# A view that keeps the tallest height it has had since the run began (a canvas wraps onto more rows at some steps
# than at others): what follows it does not jump while the run plays. RUN_JS lets it start afresh.
HOLD_JS = """
const held = element.closest('.block') || element;
held.classList.add('dg-held-height');
new ResizeObserver(() => {
  const h = held.getBoundingClientRect().height;
  if (h > (parseFloat(held.style.minHeight) || 0)) held.style.minHeight = h + 'px';
}).observe(held);"""
# A run starts: the held heights start afresh; in the presenter view the examples fold and the canvas comes into view.
RUN_JS = """() => {
  for (const held of document.querySelectorAll('.dg-held-height')) held.style.minHeight = '';
  if (!document.body.classList.contains('dg-presenter')) return;
  const examples = document.querySelector('#dg-examples > .label-wrap.open');
  if (examples) examples.click();
  requestAnimationFrame(() => document.getElementById('dg-canvas').scrollIntoView({block: 'start'}));
}"""


@dataclass
class Settings:
    """The sampler settings (one slider per knob) and the seed: Race runs with them too."""

    knobs: list
    seed: gr.Number

    @property
    def named(self) -> dict:
        """The seed, then every knob, by the name the API gives each."""
        return {"seed": self.seed, **dict(zip(KNOB_NAMES, self.knobs))}


@dataclass
class Inputs:
    prompt: gr.Textbox
    image: gr.File
    preview: gr.Image
    thinking: gr.Checkbox
    pace: gr.Slider
    go: gr.Button
    stop: gr.Button
    settings: Settings
    mode: gr.Radio  # diffusion, hybrid or AR (dg.ui.modes)

    @property
    def run(self) -> dict:
        """What a run reads by its API name, in order: prompt, image, thinking, seed, then every knob."""
        return {"prompt": self.prompt, "image": self.image, "thinking": self.thinking, **self.settings.named}


@dataclass
class Views:
    status: gr.Markdown
    panel: gr.HTML
    canvas: gr.HTML
    text: gr.HTML
    picker: gr.Dropdown
    show: gr.Radio
    play: gr.Button
    step: gr.Slider
    pos: gr.Number
    inspector: gr.HTML
    timer: gr.Timer
    playing: gr.State
    legend: gr.HTML  # the states the chosen mode can show


@dataclass
class Results:
    ab_knob: gr.Dropdown
    ab_value: gr.Number
    ab_go: gr.Button
    ab_a: gr.HTML
    ab_b: gr.HTML
    ab_summary: gr.Markdown
    plots: list  # entropy heatmap, settle steps, accepted per step, canvas timeline
    trace_file: gr.File


@dataclass
class GenerateTab:
    """What the other tabs use: the settings, the run picker and the Pace their own runs play at."""

    settings: Settings
    picks: Picks  # the run picker, and the views of other tabs that follow it
    pace: gr.Slider

    @property
    def picker(self) -> gr.Dropdown:
        return self.picks.picker


def build(runner, shared: RunState) -> GenerateTab:
    """Prompt + settings on the left; live canvas, step panel, replay, inspector and A/B on the right; plots below.
    The presenter view (theme.CSS) makes the inputs one bar on top and stacks the rest under it, full width."""
    with gr.Row(elem_id="dg-main"):
        with gr.Column(scale=2, min_width=340, elem_id="dg-inputs"):
            inputs = _input_column(runner)
        with gr.Column(scale=3, min_width=420, elem_id="dg-views"):
            views = _view_column(runner, inputs.mode.value)
            edit = edit_panel.panel(runner, inputs.prompt, inputs.thinking)
            ab = _ab_box()
    results = _results(ab)
    reference = SkillExamples.load()
    _wire_layout(inputs, views)  # first: a click's JS runs before the run it starts sends its first frame
    plot_io = _wire_generate(runner, shared, reference, inputs, views, results)
    picks = Picks(views.picker)
    edit_panel.wire(runner, shared, edit, edit_panel.Hooks(
        inputs.run, inputs.image, picks, views.status,
        [views.canvas, views.panel, views.text, views.inspector, views.step, results.trace_file],
        inputs.pace, live=partial(live_draw, runner.tokenizer, views),
        finished=lambda kept: _run_view(runner, reference, views, results, kept),
        meta=lambda *produced: run_meta(runner, *produced), plots=plot_io))
    _wire_replay(runner, shared, reference, views, results)
    _wire_ab(runner, shared, inputs, views, results)
    inputs.image.change(show_image, inputs.image, inputs.preview, api_visibility="private")
    return GenerateTab(inputs.settings, picks, inputs.pace)


def _input_column(runner) -> Inputs:
    """The prompt and what a run reads. The presenter view lays the prompt, Generate/Stop, mode, thinking and pace
    out as one bar, the Examples folded under it, the image and the settings below the views (theme.CSS)."""
    prompt = gr.Textbox(label="Prompt", lines=2, placeholder="Ask something, or pick an example below",
                        elem_id="dg-prompt")
    with gr.Row(elem_id="dg-image-row"):
        image = gr.File(label="Image (optional)", file_types=["image"], type="filepath", height=110)
        preview = gr.Image(label="Image", interactive=False, height=110, visible=False)
    thinking = gr.Checkbox(label="Thinking", info="<|think|>: a thought channel first, then the answer",
                           elem_id="dg-thinking")
    mode = modes.selector()
    pace = gr.Slider(0, MAX_PACE_MS, value=0, step=50, label="Pace: ms per step on screen", elem_id="dg-pace",
                     info="0 = as fast as the model runs; more = slow motion to narrate (the sampler keeps its speed)")
    with gr.Row(elem_id="dg-run"):
        go = gr.Button("Generate", variant="primary", elem_id="dg-go")
        stop = gr.Button("Stop", variant="stop", elem_id="dg-stop")
    _examples(runner, prompt, image, thinking)
    with gr.Accordion("Sampler settings", open=False, elem_id="dg-settings"):
        config = runner.sampler_config
        knobs = [_knob_slider(k, config, budget_limit(runner.model)) for k in KNOBS]
        # no precision=0: Gradio would round 1.5 to 2 and run another seed; dg's check refuses it instead
        seed = gr.Number(0, label="seed", info="torch.manual_seed(seed) right before the run")
    return Inputs(prompt, image, preview, thinking, pace, go, stop, Settings(knobs, seed), mode)


def _examples(runner, prompt, image, thinking) -> gr.Accordion:
    """The examples, open beside the views for a visitor, folded in the presenter view (PRESENTER_JS in dg.ui.app
    folds them, and a Generate click folds them again there): open, the tiny model's table is some 1,300 px."""
    examples = load_examples()
    with gr.Accordion("Examples", open=True, elem_id="dg-examples") as accordion:
        gr.Examples(examples["tiny"] + examples.get("race", []), [prompt, image, thinking], examples_per_page=20,
                    label="The embedded tiny model's skills (its reply is checked against the reference; the last "
                          "is the Race tab's sum, which diffusion gets wrong at seed 0 and AR right)")
        gr.Examples(examples["general"], [prompt, image, thinking], label="General (for the released model)" + (
            ": the tiny model's reply to them has no meaning" if runner.embedded else ""))
    return accordion


def _knob_slider(knob, config, budget: int | None) -> gr.Slider:
    """A knob's slider over its `KNOBS` range; the token budget's ends where the model's positions do."""
    high = min(knob.high, budget) if knob.name == "max_new_tokens" and budget else knob.high
    return gr.Slider(knob.low, high, value=min(getattr(config, knob.name), high), step=knob.step, label=knob.name,
                     info=knob.help)


def _legend(shown_mode: str) -> str:
    """The legend of the mode chosen on the selector (its name as shown there)."""
    return render.legend_html(modes.engine_mode(shown_mode))


def _view_column(runner, mode: str) -> Views:
    """The legend, the canvas with the status line under it, the step panel, the text, the replay and inspector.
    Nothing above the canvas changes while a run plays (the legend changes with the mode), and the canvas and
    panel keep their height through a run (HOLD_JS), so neither the canvas nor what follows it jumps."""
    gr.HTML(CSS, elem_id="dg-css")  # the page's one copy of the views' CSS
    legend = gr.HTML(_legend(mode), elem_id="dg-legend")
    canvas = gr.HTML(render.canvas_parts(Trace(), runner.tokenizer), html_template=render.PARTS_TEMPLATE,
                     elem_id="dg-canvas", js_on_load=CLICK_JS + HOLD_JS)
    status = gr.Markdown("Pick an example or type a prompt, then **Generate**.", elem_id="dg-status")
    panel = gr.HTML(elem_id="dg-panel", js_on_load=HOLD_JS)
    text = gr.HTML(elem_id="dg-text")
    with gr.Row(elem_id="dg-replay-row"):
        run_picker = gr.Dropdown([], label="Run", info=PICKER_INFO, scale=3,
                                 elem_id="dg-run-picker")
        show = gr.Radio(list(render.SHOWS), value="argmax", label="cells show", scale=2)
        play = gr.Button(PLAY, scale=1)
    step = gr.Slider(1, 2, value=1, step=1, label=REPLAY,
                     elem_id="dg-replay", interactive=False)  # until a run exists
    with gr.Row(elem_id="dg-inspect-row"):
        # no precision or minimum: Gradio would round 2.5 or word a -1 its own way; `check_pos` names both
        pos = gr.Number(0, label="Inspect position (click a cell)", elem_id="dg-pos", scale=1, min_width=120)
        inspector = gr.HTML(scale=3)
    return Views(status, panel, canvas, text, run_picker, show, play, step, pos, inspector,
                 gr.Timer(PLAY_INTERVAL_S, active=False), gr.State(False), legend)


def _wire_layout(inputs: Inputs, views: Views) -> None:
    """The legend follows the mode selector; a Generate click (or Enter in the prompt) starts the views' held
    heights afresh and, in the presenter view, folds the examples and scrolls to the canvas."""
    inputs.mode.change(_legend, inputs.mode, views.legend, queue=False, show_progress="hidden",
                       api_visibility="private")
    for starts_a_run in (inputs.go.click, inputs.prompt.submit):
        starts_a_run(None, js=RUN_JS)


def _ab_box() -> tuple:
    """A/B next to the canvas, its results right under its button."""
    with gr.Accordion("A/B: the same prompt and seed, one knob changed", open=False):
        with gr.Row():
            knob = gr.Dropdown(KNOB_NAMES, value="entropy_bound", label="knob")
            value = gr.Number(0.5, label="B value")
            go = gr.Button("Run A/B")
        with gr.Row():
            a, b = gr.HTML(), gr.HTML()
        summary_table = gr.Markdown()
    return knob, value, go, a, b, summary_table


def _results(ab) -> Results:
    with gr.Row():
        heat, settle = gr.Plot(label="Entropy heatmap"), gr.Plot(label="Settle step")
    with gr.Row():
        accepted, timeline = gr.Plot(label="Accepted per step"), gr.Plot(label=modes.FOURTH_PLOT)
    trace_file = gr.File(label="Trace of the selected run (JSON)", interactive=False)
    return Results(*ab, [heat, settle, accepted, timeline], trace_file)


def check_pos(trace, pos) -> int:
    """The inspected position inside the canvas (the box takes any number); else a ValueError naming it."""
    pos = pos or 0
    if pos != int(pos):
        raise ValueError(f"position must be a whole number, got {pos}")
    pos = int(pos)
    steps = trace.steps if trace is not None else []
    if steps and not 0 <= pos < len(steps[0].argmax):
        raise ValueError(f"position {pos} is outside this canvas's 0–{len(steps[0].argmax) - 1}")
    if pos < 0:  # no canvas to name: the box's own range
        raise ValueError(f"position must be 0 or more, got {pos}")
    return pos if steps else 0


def inspect_at(trace, tokenizer, index, pos) -> str:
    """The inspector at a step index (clamped to the trace) and a position inside the canvas."""
    if not trace.steps:
        return ""
    index = min(max(int(index), 0), len(trace.steps) - 1)
    return render.inspector_html(trace, tokenizer, index, check_pos(trace, pos))


def show_image(path):
    """The uploaded picture as a thumbnail, or a warning when it is not one."""
    try:
        picture = open_upload(path) if path else None
    except ValueError as err:
        gr.Warning(str(err))
        picture = None
    if picture is not None:
        picture.thumbnail((256, 256))
    return gr.Image(value=picture, visible=picture is not None)


def run_meta(runner, prompt, image, thinking, seed) -> dict:
    """What produced a run, as its exports record it."""
    return {"prompt": prompt, "image": Path(image).name if image else None, "thinking": bool(thinking),
            "seed": seed, "model": runner.name}


def text_and_check(kept: KeptRun, runner, reference: SkillExamples) -> str:
    """The run's text, and for a skill example its reference answer with ✓ or ✗; on the embedded model, a note
    when the prompt is none of its five skills."""
    tokenizer = runner.tokenizer
    prompt, image = kept.meta.get("prompt", ""), kept.meta.get("image")
    check = reference.check(prompt, image, kept.trace, tokenizer)
    html = render.text_view_html(kept.trace, tokenizer)
    if check is None and runner.embedded and skill_of(prompt, bool(image)) is None:
        return html + notes.outside_skills_html()  # the tiny model's reply to anything else means nothing
    return html + (render.check_html(check.reference, check.correct) if check is not None else "")


def _run_view(runner, reference, views: Views, results: Results, kept: KeptRun, show="argmax", pos=0) -> dict:
    """One finished run at its last step: canvas, panel, text (+ reference check), the slider over all its
    run steps (1 … N), its trace file."""
    trace, tokenizer = kept.trace, runner.tokenizer
    n = len(trace.steps)
    return {views.canvas: render.canvas_parts(trace, tokenizer, n - 1 if n else None, show=show,
                                             inspect=check_pos(trace, pos) if n else None),
            views.panel: render.step_panel_html(trace, n - 1 if n else None),
            views.text: text_and_check(kept, runner, reference),
            views.inspector: inspect_at(trace, tokenizer, n - 1, pos),
            views.step: gr.Slider(minimum=1, maximum=max(n, 2), value=max(n, 1), interactive=True, label=REPLAY),
            results.trace_file: str(export.trace_json(trace, scratch_dir() / "trace.json", kept.meta))}


def live_draw(tokenizer, views: Views, run: LiveRun, history) -> Callable[..., dict]:
    """How `run`, a run of the session with `history`, draws into Generate's views: `paced_views` of each frame,
    with the run picker and the replay held while it plays (saying the live run comes, not showing the one before)."""
    held = {views.picker: live_picker(history), views.step: gr.Slider(interactive=False, label=LIVE_REPLAY)}

    def draw(frame: Trace, index: int | None, pace: Pace) -> dict:
        return {**paced_views(tokenizer, views, run, frame, index, pace), **held}  # one `held`: the stream sends it once
    return draw


def live_views(shown: Trace, tokenizer) -> tuple[list[str], str, str]:
    """What a live frame redraws: the canvas (one fragment per cell), the step panel, the text so far."""
    return render.canvas_parts(shown, tokenizer), render.step_panel_html(shown), render.text_view_html(shown, tokenizer)


def paced_views(tokenizer, views: Views, run: LiveRun, frame: Trace, index: int | None, pace: Pace) -> dict:
    """A live frame of `run` as Generate's views show it at `pace` (`index`: the step to show; None: the one due)."""
    shown = render.trace_until(frame, pace.index(len(frame.steps)) if index is None else index)
    canvas, panel, text = live_views(shown, tokenizer)
    return {views.canvas: canvas, views.panel: panel, views.text: text,
            views.status: _live_status(run, frame, shown, pace)}


def _live_status(run: LiveRun, frame: Trace, shown: Trace, pace: Pace) -> str:
    if not (frame.steps or frame.tokens):
        return waiting_message(run)
    if pace.seconds <= 0 or not frame.steps:  # an AR run has no steps to slow down
        return "running…"
    where = "finished" if frame.done else f"at run step {len(frame.steps)}"
    return (f"slow motion, {pace.seconds * 1000:.0f} ms a step: showing run step {len(shown.steps)} "
            f"(the sampler is {where}; Stop ends the slow motion)")


def _wire_generate(runner, shared: RunState, reference: SkillExamples, inputs: Inputs, views: Views,
                   results: Results) -> dict:
    """Generate, Stop and the run picker; returns the chained event that draws the picked run's plots."""
    tok = runner.tokenizer

    async def generate(prompt, image, thinking, seed, *rest, request=None):
        *knobs, mode, pace_ms, history = rest
        run_inputs, config, seed = prepare(runner, prompt, image, thinking, seed, knobs)
        mode = modes.engine_mode(mode)
        run = LiveRun.of(runner, mode, run_inputs, config, None if mode == "ar" else seed).start()
        async for update in paced_stream(shared, request, run, live_draw(tok, views, run, history), pace_ms):
            yield update
        trace = run.snapshot()
        history = history.keep(prompt, trace, meta=run_meta(runner, prompt, image, thinking, seed))
        yield {**_run_view(runner, reference, views, results, history.run(None)), shared.history: history,
               views.picker: picker(history), views.status: summary(trace)}

    def pick(history, label, show, pos):
        kept = history.run(label)
        with refused_input():  # a position outside the picked run's canvas
            return _run_view(runner, reference, views, results, kept, show, pos) if kept is not None else {}

    def show_plots(history, label):
        trace = history.find(label)
        if trace is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return tuple(plots.run_figures(trace, tok))

    generate, run_inputs = named_inputs(generate, {**inputs.run, "mode": inputs.mode, "pace_ms": inputs.pace,
                                                   "runs": shared.history})
    outputs = [views.canvas, views.panel, views.text, views.status, views.step, views.inspector, results.trace_file,
               shared.history, views.picker]
    plot_io = dict(fn=show_plots, inputs=[shared.history, views.picker], outputs=results.plots)
    run_io = dict(inputs=run_inputs, outputs=outputs, show_progress="hidden")
    inputs.go.click(generate, api_name="generate", **run_io).then(api_name="plots", **plot_io)  # canvas, then plots
    inputs.prompt.submit(generate, api_visibility="private", **run_io).then(api_visibility="private", **plot_io)
    inputs.stop.click(shared.stop, None, views.status, api_name="stop", queue=False)
    views.picker.input(pick, [shared.history, views.picker, views.show, views.pos], outputs[:7],
                       api_visibility="private").then(api_visibility="private", **plot_io)
    return plot_io


def _wire_replay(runner, shared: RunState, reference: SkillExamples, views: Views, results: Results) -> None:
    """The slider counts run steps from 1, as the canvas label and the plots do."""
    tok = runner.tokenizer

    def replay(history, label, step, show, pos):
        trace = history.find(label) if label is not None else None  # None: a run is playing, or none is kept
        with refused_input():  # a typed position outside the canvas: one line, the views stay as they were
            inspect = check_pos(trace, pos)
        if trace is None or not trace.steps:
            return gr.skip(), gr.skip(), gr.skip()
        index = step_index(trace, step)
        return (render.canvas_parts(trace, tok, index, show=show, inspect=inspect),
                render.step_panel_html(trace, index), inspect_at(trace, tok, index, inspect))

    def toggle(playing, history, label, step):
        if label is None and history.labels:  # a run is playing: Play waits for it to be kept
            return gr.skip()
        trace = history.find(label)
        if trace is None or not trace.steps:
            gr.Warning("Nothing to play yet: generate a run first.")
            return False, gr.Timer(active=False), gr.Button(PLAY), gr.skip()
        playing = not playing
        restart = playing and int(step) >= len(trace.steps)
        return playing, gr.Timer(active=playing), gr.Button(PAUSE if playing else PLAY), 1 if restart else gr.skip()

    @unless_live
    def tick(history, label, step):
        trace = history.find(label)
        if trace is None or int(step) >= len(trace.steps):
            return False, gr.Timer(active=False), gr.Button(PLAY), gr.skip()
        return True, gr.skip(), gr.skip(), int(step) + 1

    replay_io = dict(inputs=[shared.history, views.picker, views.step, views.show, views.pos],
                     outputs=[views.canvas, views.panel, views.inspector], show_progress="hidden")
    views.step.change(replay, api_name="replay", **replay_io)
    views.show.change(replay, api_visibility="private", **replay_io)
    views.pos.change(replay, api_visibility="private", **replay_io)
    player = [views.playing, views.timer, views.play, views.step]
    views.play.click(toggle, [views.playing, shared.history, views.picker, views.step], player,
                     api_visibility="private")
    views.timer.tick(tick, [shared.history, views.picker, views.step], player, api_visibility="private",
                     show_progress="hidden")


def _wire_ab(runner, shared: RunState, inputs: Inputs, views: Views, results: Results) -> None:
    """A/B: A with the settings, B with one knob changed; same prompt and seed (B runs after A)."""
    tok = runner.tokenizer

    async def ab(prompt, image, thinking, seed, *rest, request=None):
        *knobs, knob, value, history = rest
        run_inputs, config_a, seed = prepare(runner, prompt, image, thinking, seed, knobs)
        config_b = with_knob(runner, run_inputs, config_a, knob, value)
        if config_b == config_a:
            gr.Warning(f"B sets {knob} = {value}, the same as A: both runs will match.")
        a = LiveRun.of(runner, "diffusion", run_inputs, config_a, seed, label="A").start()
        b = LiveRun.of(runner, "diffusion", run_inputs, config_b, seed, label="B").start()
        titles = (f"A: {knob} = {getattr(config_a, knob)}", f"B: {knob} = {getattr(config_b, knob)}")

        def draw(fa, fb):
            return {results.ab_a: render.canvas_html(fa, tok, title=titles[0]) + render.text_view_html(fa, tok),
                    results.ab_b: render.canvas_html(fb, tok, title=titles[1]) + render.text_view_html(fb, tok)}

        async for update in stream(shared, request, [a, b], draw):
            yield update
        fa, fb = a.snapshot(), b.snapshot()
        meta = run_meta(runner, prompt, image, thinking, seed)
        history = history.keep(prompt, fa, " A", meta).keep(prompt, fb, " B", meta)
        yield {**draw(fa, fb), results.ab_summary: compare_table(dict(zip(titles, (fa, fb)))),
               shared.history: history, views.picker: picker(history, select=False)}

    ab, ab_inputs = named_inputs(ab, {**inputs.run, "b_knob": results.ab_knob, "b_value": results.ab_value,
                                      "runs": shared.history})
    results.ab_go.click(ab, ab_inputs,
                        [results.ab_a, results.ab_b, results.ab_summary, shared.history, views.picker], api_name="ab",
                        show_progress="hidden")
