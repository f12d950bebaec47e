"""The Generate tab: prompt and settings, the live canvas, the replay and inspector, plots, A/B.

A run streams into the canvas while it denoises (dg.ui.runs in a background thread); when it ends it
joins the session's history, the replay slider and the run picker reach every step of it, and a
chained event draws its four plots.

    python app.py   # then the Generate tab
"""

from dataclasses import dataclass

import gradio as gr

from dg.config import KNOBS
from dg.prompts import open_image
from dg.trace import Trace
from dg.ui.common import KNOB_NAMES, Shared, load_examples, named, picker, prepare, stream, vary
from dg.ui.runs import diffusion_run, waiting_message
from dg.ui.session import compare_table, scratch_dir, summary
from dg.view import export, plots, render
from dg.view.theme import CSS

PLAY_INTERVAL_S = 0.125  # replay speed: eight steps a second
# Clicking a canvas cell writes its data-pos into the inspector's position box.
CLICK_JS = """element.addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pos]');
  const box = document.querySelector('#dg-pos input');
  if (!cell || !box) return;
  box.value = cell.dataset.pos;
  box.dispatchEvent(new Event('input', {bubbles: true}));
});"""


@dataclass
class Settings:
    """The sampler settings (one slider per knob) and the seed: Race runs with them too."""

    knobs: list
    seed: gr.Number


@dataclass
class Inputs:
    prompt: gr.Textbox
    image: gr.File
    preview: gr.Image
    thinking: gr.Checkbox
    go: gr.Button
    stop: gr.Button
    settings: Settings
    ab_knob: gr.Dropdown
    ab_value: gr.Number
    ab_go: gr.Button

    @property
    def run(self) -> list:
        """What a run reads, in the API's order: prompt, image, thinking, seed, then every knob."""
        return [self.prompt, self.image, self.thinking, self.settings.seed, *self.settings.knobs]


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


@dataclass
class Results:
    ab_box: gr.Accordion
    ab_a: gr.HTML
    ab_b: gr.HTML
    ab_summary: gr.Markdown
    plots: list  # entropy heatmap, settle steps, accepted per step, canvas timeline
    trace_file: gr.File


@dataclass
class GenerateTab:
    """What the other tabs use: the settings, the run picker and the replay slider."""

    settings: Settings
    picker: gr.Dropdown
    step: gr.Slider


def build(loaded, shared: Shared) -> GenerateTab:
    """Prompt + settings on the left; live canvas, step panel, replay and inspector on the right; plots below."""
    with gr.Row():
        with gr.Column(scale=2, min_width=340):
            inputs = _input_column(loaded)
        with gr.Column(scale=3):
            views = _view_column(loaded)
    results = _results()
    _wire_generate(loaded, shared, inputs, views, results)
    _wire_replay(loaded, shared, views, results)
    _wire_ab(loaded, shared, inputs, views, results)
    inputs.image.change(show_image, inputs.image, inputs.preview, api_visibility="private")
    return GenerateTab(inputs.settings, views.picker, views.step)


def _input_column(loaded) -> Inputs:
    prompt = gr.Textbox(label="Prompt", lines=2, placeholder="Ask something, or pick an example below")
    with gr.Row():
        image = gr.File(label="Image (optional)", file_types=["image"], type="filepath", height=110)
        preview = gr.Image(label="Image", interactive=False, height=110, visible=False)
    thinking = gr.Checkbox(label="Thinking", info="<|think|>: a thought channel first, then the answer")
    with gr.Row():
        go = gr.Button("Generate", variant="primary", elem_id="dg-go")
        stop = gr.Button("Stop", variant="stop")
    with gr.Accordion("Sampler settings and A/B", open=False):
        config = loaded.sampler_config
        knobs = [gr.Slider(k.low, k.high, value=getattr(config, k.name), step=k.step, label=k.name, info=k.help)
                 for k in KNOBS]
        seed = gr.Number(0, label="seed", precision=0, info="torch.manual_seed(seed) right before the run")
        gr.Markdown("**A/B**: the same prompt and seed with one knob changed, side by side.")
        with gr.Row():
            ab_knob = gr.Dropdown(KNOB_NAMES, value="entropy_bound", label="knob")
            ab_value = gr.Number(0.5, label="B value")
        ab_go = gr.Button("Run A/B")
    examples = load_examples()
    gr.Examples(examples["tiny"], [prompt, image, thinking], label="The embedded tiny model's skills")
    gr.Examples(examples["general"], [prompt, image, thinking], label="General (released model)")
    return Inputs(prompt, image, preview, thinking, go, stop, Settings(knobs, seed), ab_knob, ab_value, ab_go)


def _view_column(loaded) -> Views:
    status = gr.Markdown("Pick an example or type a prompt, then **Generate**.", elem_id="dg-status")
    gr.HTML(CSS + render.legend_html())  # the page's one copy of the views' CSS
    panel = gr.HTML(render.step_panel_html(Trace()))
    canvas = gr.HTML(render.canvas_html(Trace(), loaded.tokenizer), elem_id="dg-canvas", js_on_load=CLICK_JS)
    text = gr.HTML()
    with gr.Row():
        run_picker = gr.Dropdown([], label="Run (every run of this session keeps its replay)", scale=3)
        show = gr.Radio(list(render.SHOWS), value="argmax", label="cells show", scale=2)
        play = gr.Button("▶ Play", scale=1)
    step = gr.Slider(0, 1, value=0, step=1, label="Replay: step (all canvases in order)")
    with gr.Row():
        pos = gr.Number(0, label="Inspect position (click a cell)", precision=0, elem_id="dg-pos", minimum=0,
                        scale=1)
        inspector = gr.HTML(scale=3)
    return Views(status, panel, canvas, text, run_picker, show, play, step, pos, inspector,
                 gr.Timer(PLAY_INTERVAL_S, active=False), gr.State(False))


def _results() -> Results:
    with gr.Accordion("A/B result", visible=False) as ab_box:
        with gr.Row():
            ab_a, ab_b = gr.HTML(), gr.HTML()
        ab_summary = gr.Markdown()
    with gr.Row():
        heat, settle = gr.Plot(label="Entropy heatmap"), gr.Plot(label="Settle step")
    with gr.Row():
        accepted, timeline = gr.Plot(label="Accepted per step"), gr.Plot(label="Canvas timeline")
    trace_file = gr.File(label="Trace of the selected run (JSON)", interactive=False)
    return Results(ab_box, ab_a, ab_b, ab_summary, [heat, settle, accepted, timeline], trace_file)


def inspect_at(trace, tokenizer, step, pos) -> str:
    """The inspector at a step and position, both clamped to the trace."""
    if not trace.steps:
        return ""
    pos = min(max(int(pos or 0), 0), len(trace.steps[0].argmax) - 1)
    return render.inspector_html(trace, tokenizer, min(max(int(step), 0), len(trace.steps) - 1), pos)


def show_image(path):
    """The uploaded picture as a thumbnail, or a warning when it is not one."""
    try:
        picture = open_image(path) if path else None
    except ValueError as err:
        gr.Warning(str(err))
        picture = None
    if picture is not None:
        picture.thumbnail((256, 256))
    return gr.Image(value=picture, visible=picture is not None)


def _run_view(tokenizer, views: Views, results: Results, trace, show="argmax", pos=0) -> dict:
    """One finished run: its last step, its text, the slider over all its steps, its trace file."""
    last = len(trace.steps) - 1 if trace.steps else None
    return {views.canvas: render.canvas_html(trace, tokenizer, last, show=show),
            views.panel: render.step_panel_html(trace, last), views.text: render.text_view_html(trace, tokenizer),
            views.inspector: inspect_at(trace, tokenizer, last or 0, pos),
            views.step: gr.Slider(maximum=max(last or 0, 1), value=last or 0),
            results.trace_file: str(export.trace_json(trace, scratch_dir() / "trace.json"))}


def _wire_generate(loaded, shared: Shared, inputs: Inputs, views: Views, results: Results) -> None:
    tok = loaded.tokenizer

    async def generate(prompt, image, thinking, seed, *rest, request=None):
        *knobs, history = rest
        run_inputs, config, seed = prepare(loaded, prompt, image, thinking, seed, knobs)
        run = diffusion_run(loaded, run_inputs, config, seed).start()

        def draw(frame):
            return {views.canvas: render.canvas_html(frame, tok), views.panel: render.step_panel_html(frame),
                    views.text: render.text_view_html(frame, tok),
                    views.status: "running…" if frame.steps else waiting_message(run)}

        async for update in stream(shared, request, [run], draw):
            yield update
        trace = run.snapshot()
        history = history.keep(prompt, trace)
        yield {**_run_view(tok, views, results, trace), shared.history: history, views.picker: picker(history),
               views.status: summary(trace)}

    def pick(history, label, show, pos):
        trace = history.find(label)
        return _run_view(tok, views, results, trace, show, pos) if trace is not None else {}

    def show_plots(history, label):
        trace = history.find(label)
        if trace is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return (plots.entropy_heatmap(trace), plots.settle_steps(trace), plots.accepted_per_step(trace),
                plots.canvas_timeline(trace, tok))

    generate = named(generate, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "runs")
    outputs = [views.canvas, views.panel, views.text, views.status, views.step, views.inspector, results.trace_file,
               shared.history, views.picker]
    plot_io = dict(fn=show_plots, inputs=[shared.history, views.picker], outputs=results.plots)
    inputs.go.click(generate, [*inputs.run, shared.history], outputs, api_name="generate",
                    show_progress="hidden").then(api_name="plots", **plot_io)  # the final canvas first, then plots
    inputs.prompt.submit(generate, [*inputs.run, shared.history], outputs, show_progress="hidden",
                         api_visibility="private").then(api_visibility="private", **plot_io)
    inputs.stop.click(shared.stop, None, views.status, api_name="stop", queue=False)
    views.picker.input(pick, [shared.history, views.picker, views.show, views.pos], outputs[:7],
                       api_visibility="private").then(api_visibility="private", **plot_io)


def _wire_replay(loaded, shared: Shared, views: Views, results: Results) -> None:
    tok = loaded.tokenizer

    def replay(history, label, step, show, pos):
        trace = history.find(label)
        if trace is None or not trace.steps:
            return gr.skip(), gr.skip(), gr.skip()
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        return (render.canvas_html(trace, tok, step, show=show), render.step_panel_html(trace, step),
                inspect_at(trace, tok, step, pos))

    def toggle(playing, history, label, step):
        trace = history.find(label)
        if trace is None or not trace.steps:
            gr.Warning("Nothing to play yet: generate a run first.")
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
        playing = not playing
        restart = playing and int(step) >= len(trace.steps) - 1
        return (playing, gr.Timer(active=playing), gr.Button("⏸ Pause" if playing else "▶ Play"),
                0 if restart else gr.skip())

    def tick(history, label, step):
        trace = history.find(label)
        if trace is None or int(step) + 1 >= len(trace.steps):
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
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


def _wire_ab(loaded, shared: Shared, inputs: Inputs, views: Views, results: Results) -> None:
    """A/B: A with the settings, B with one knob changed; same prompt and seed (B runs after A: the RNG lock)."""
    tok = loaded.tokenizer

    async def ab(prompt, image, thinking, seed, *rest, request=None):
        *knobs, knob, value, history = rest
        run_inputs, config_a, seed = prepare(loaded, prompt, image, thinking, seed, knobs)
        config_b = vary(loaded, run_inputs, config_a, knob, value)
        if config_b == config_a:
            gr.Warning(f"B sets {knob} = {value}, the same as A: both runs will match.")
        a = diffusion_run(loaded, run_inputs, config_a, seed, label="A").start()
        b = diffusion_run(loaded, run_inputs, config_b, seed, label="B").start()
        titles = (f"A: {knob} = {getattr(config_a, knob)}", f"B: {knob} = {getattr(config_b, knob)}")

        def draw(fa, fb):
            return {results.ab_box: gr.Accordion(visible=True),
                    results.ab_a: render.canvas_html(fa, tok, title=titles[0]) + render.text_view_html(fa, tok),
                    results.ab_b: render.canvas_html(fb, tok, title=titles[1]) + render.text_view_html(fb, tok)}

        async for update in stream(shared, request, [a, b], draw):
            yield update
        fa, fb = a.snapshot(), b.snapshot()
        history = history.keep(prompt, fa, " A").keep(prompt, fb, " B")
        yield {**draw(fa, fb), results.ab_summary: compare_table(dict(zip(titles, (fa, fb)))),
               shared.history: history, views.picker: picker(history, select=False)}

    ab = named(ab, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "b_knob", "b_value", "runs")
    inputs.ab_go.click(ab, [*inputs.run, inputs.ab_knob, inputs.ab_value, shared.history],
                       [results.ab_box, results.ab_a, results.ab_b, results.ab_summary, shared.history,
                        views.picker], api_name="ab", show_progress="hidden")
