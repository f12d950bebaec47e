"""The dg demo: watch DiffusionGemma denoise its canvas, race it against AR decoding, learn how it works.

Only UI lives here: each view builds its components and wires events to dg (dg.live runs the sampler
in a background thread; dg.render / dg.plots / dg.export / dg.learn draw and explain the trace).

    python app.py [--model DIR_OR_ID] [--ar-model DIR_OR_ID] [--port N] [--share]
"""

import argparse
import html
import inspect
import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from dg import export, learn, live, plots, race, render
from dg.config import KNOBS
from dg.prompts import build_inputs, open_image
from dg.trace import Trace

FPS = 20  # live frames per second at most; every step is kept for the replay
MAX_RUNS = 20  # replays kept per session
MAX_UPLOAD = "20mb"
EXAMPLES_DIR = Path(__file__).resolve().parent / "assets" / "examples"
KNOB_NAMES = [k.name for k in KNOBS]
TINY_EXAMPLES = [  # one per skill of the embedded model (dg/tiny/skills.py)
    ["Solve the sudoku: .431/3.24/1.42/.213", None, True],
    ["Solve the sudoku: 4.32/2.14/3241/...3", None, False],
    ["What is 487 + 356?", None, True],
    ["Compute 742 + 253.", None, False],
    ["How many shapes are in the picture?", str(EXAMPLES_DIR / "three-shapes.png"), False],
    ["Describe the picture.", str(EXAMPLES_DIR / "two-shapes.png"), False],
    ["What colour is the circle?", str(EXAMPLES_DIR / "four-shapes.png"), False],
    ["Convert to JSON: Rosa works as a farmer and owns a hamster.", None, False],
    ["Write one sentence about a bear named Alice who likes honey.", None, False],
]
GENERAL_EXAMPLES = [  # for the released model
    ["Explain in three sentences how a diffusion language model writes text.", None, False],
    ["Write a Python function that checks whether a number is prime.", None, False],
    ["A train leaves at 14:05 and arrives at 17:40. How long is the trip?", None, True],
]
CLICK_JS = """element.addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pos]');
  const box = document.querySelector('#dg-pos input');
  if (!cell || !box) return;
  box.value = cell.dataset.pos;
  box.dispatchEvent(new Event('input', {bubbles: true}));
  box.dispatchEvent(new Event('change', {bubbles: true}));
});"""


def _error(err: Exception) -> gr.Error:
    return gr.Error(str(err), title="Can't run that")


def _prepare(loaded, prompt, image, thinking, seed, knobs):
    """Validate everything the user set; raise a gr.Error that names the bad value."""
    try:
        config = live.config_from_values(loaded.sampler_config, dict(zip(KNOB_NAMES, knobs)))
        if seed is None or float(seed) != int(seed) or not 0 <= int(seed) < 2**63:
            raise ValueError(f"seed must be a whole number in [0, 2^63), got {seed}")
        picture = open_image(image) if image else None
        inputs = build_inputs(loaded.processor, prompt, images=picture, thinking=bool(thinking), device=loaded.device)
        live.check_context(loaded.model, inputs, config)
    except (ValueError, TypeError) as err:
        raise _error(err) from None
    return inputs, config, int(seed), picture


def _named(fn, *names):
    """`fn(*values, request=...)` as a generator with one named parameter per input, so the API names each knob."""

    def named(*args):
        *values, request = args
        yield from fn(*values, request=request)

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    params.append(inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                    annotation=gr.Request))
    named.__signature__ = inspect.Signature(params)
    return named


def _label(runs, prompt, trace, tag="") -> str:
    stopped = " (stopped)" if trace.end is not None and trace.end.finish_reason == "cancelled" else ""
    short = prompt if len(prompt) <= 32 else prompt[:31] + "…"
    return f"#{len(runs) + 1}{tag} {short} · {len(trace.steps)} steps{stopped}"


def _keep(runs, label, trace) -> list:
    return ([*runs, {"label": label, "trace": trace}])[-MAX_RUNS:]


def _find(runs, label):
    return next((r["trace"] for r in reversed(runs) if r["label"] == label), runs[-1]["trace"] if runs else None)


def _notify(run, trace):
    if run.error:
        gr.Warning(f"The run failed: {run.error}. What it produced so far is kept.")
    elif trace.end is not None and trace.end.finish_reason == "cancelled":
        gr.Info(f"Stopped after {len(trace.steps)} steps; the partial run is kept for replay.")


def _waiting(run) -> str:
    why = "another run holds the model (runs take turns, so a seed always gives the same canvas)"
    return f"⏳ waiting: {why}" if run.queued else "running…"


def generate_view(loaded, ui):
    """Prompt, live canvas, per-step panel, replay with run picker, inspector, plots, settings + A/B."""
    tok = loaded.tokenizer
    with gr.Row():
        with gr.Column(scale=3):
            ui.prompt = gr.Textbox(label="Prompt", lines=2, placeholder="Ask something…", max_length=20_000)
            with gr.Row():
                ui.image = gr.File(label="Image (optional)", file_types=["image"], type="filepath", height=90)
                ui.preview = gr.Image(label="Image preview", interactive=False, height=120, visible=False)
                ui.thinking = gr.Checkbox(label="Thinking", info="<|think|>: reason first, then answer")
            with gr.Row():
                ui.go = gr.Button("Generate", variant="primary")
                ui.stop = gr.Button("Stop", variant="stop")
            gr.Examples(TINY_EXAMPLES, [ui.prompt, ui.image, ui.thinking], label="Embedded tiny model's skills")
            gr.Examples(GENERAL_EXAMPLES, [ui.prompt, ui.image, ui.thinking], label="General (released model)")
        with gr.Column(scale=2), gr.Accordion("Sampler settings", open=False):
            cfg = loaded.sampler_config
            ui.knobs = [gr.Slider(k.low, k.high, value=getattr(cfg, k.name), step=k.step, label=k.name, info=k.help)
                        for k in KNOBS]
            ui.seed = gr.Number(0, label="seed", precision=0, info="torch.manual_seed(seed) right before the run")
            gr.Markdown("**A/B**: the same prompt and seed, one knob changed, side by side.")
            with gr.Row():
                ui.ab_knob = gr.Dropdown(KNOB_NAMES, value="entropy_bound", label="knob to change")
                ui.ab_value = gr.Number(0.5, label="B value")
            ui.ab_go = gr.Button("Run A/B")
    ui.status = gr.Markdown()
    gr.HTML(render.legend_html())
    ui.panel = gr.HTML(render.step_panel_html(Trace()))
    ui.canvas = gr.HTML(elem_id="dg-canvas", js_on_load=CLICK_JS, min_height=120)
    ui.text = gr.HTML()
    with gr.Row():
        ui.picker = gr.Dropdown([], label="Run (each run of this session keeps its replay)", scale=3)
        ui.show = gr.Radio(list(render.SHOWS), value="argmax", label="cells show", scale=2)
        ui.play = gr.Button("▶ Play", scale=1)
    ui.step = gr.Slider(0, 1, value=0, step=1, label="Replay: step (all canvases)")
    ui.timer = gr.Timer(0.125, active=False)
    ui.playing = gr.State(False)
    with gr.Row():
        ui.pos = gr.Number(0, label="Inspect position (click a cell)", precision=0, elem_id="dg-pos", scale=1)
        ui.inspector = gr.HTML(scale=4)
    with gr.Row():
        ui.heat, ui.settle = gr.Plot(label="Entropy heatmap"), gr.Plot(label="Settle step")
    with gr.Row():
        ui.accepted, ui.timeline = gr.Plot(label="Accepted per step"), gr.Plot(label="Canvas timeline")
    ui.trace_file = gr.File(label="Trace (JSON)", interactive=False)
    with gr.Accordion("A/B result", open=True, visible=False) as ui.ab_box:
        with gr.Row():
            ui.ab_a, ui.ab_b = gr.HTML(), gr.HTML()
        ui.ab_summary = gr.Markdown()

    def run_view(trace, step=None, show="argmax", pos=0) -> dict:
        last = max(len(trace.steps) - 1, 0)
        step = last if step is None else min(max(int(step), 0), last)
        folder = tempfile.mkdtemp(prefix="dg-trace-")
        return {ui.canvas: render.canvas_html(trace, tok, step if trace.steps else None, show=show),
                ui.panel: render.step_panel_html(trace, step if trace.steps else None),
                ui.text: render.text_view_html(trace, tok), ui.inspector: _inspect(trace, step, pos),
                ui.step: gr.Slider(maximum=max(last, 1), value=step), ui.heat: plots.entropy_heatmap(trace),
                ui.settle: plots.settle_steps(trace), ui.accepted: plots.accepted_per_step(trace),
                ui.timeline: plots.canvas_timeline(trace, tok),
                ui.trace_file: str(export.trace_json(trace, Path(folder) / "trace.json"))}

    def _inspect(trace, step, pos):
        if not trace.steps:
            return ""
        pos = min(max(int(pos or 0), 0), len(trace.steps[0].argmax) - 1)
        return render.inspector_html(trace, tok, min(int(step), len(trace.steps) - 1), pos)

    def generate(prompt, image, thinking, seed, *rest, request: gr.Request):
        *knobs, runs = rest
        inputs, config, seed, _ = _prepare(loaded, prompt, image, thinking, seed, knobs)
        run = live.diffusion_run(loaded, inputs, config, seed).start()
        ui.sessions.add(request.session_hash if request else "", run)
        try:
            for frame in run.frames(FPS):
                status = _waiting(run) if frame.start is None else f"running… {len(frame.steps)} steps"
                yield {ui.canvas: render.canvas_html(frame, tok), ui.panel: render.step_panel_html(frame),
                       ui.text: render.text_view_html(frame, tok), ui.status: status}
        finally:
            run.stop()  # the page went away: stop sampling; nothing here is lost
        trace = run.snapshot()
        _notify(run, trace)
        label = _label(runs, prompt, trace)
        runs = _keep(runs, label, trace)
        m = trace.metrics()
        done = (f"**Done**: {m['tokens']} tokens, {m['total_steps']} steps over {m['canvases']} canvases, "
                f"NFE {m['nfe']}, TPF {m['tpf']:.2f}, {m['wall_s']:.2f} s · finish: {trace.end.finish_reason}")
        yield {**run_view(trace), ui.runs: runs, ui.picker: gr.Dropdown([r["label"] for r in runs], value=label),
               ui.status: done}

    def replay(runs, label, step, show, pos):
        trace = _find(runs, label)
        if trace is None or not trace.steps:
            return gr.skip(), gr.skip(), gr.skip()
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        return (render.canvas_html(trace, tok, step, show=show), render.step_panel_html(trace, step),
                _inspect(trace, step, pos))

    def pick(runs, label, show, pos):
        trace = _find(runs, label)
        return run_view(trace, None, show, pos) if trace is not None else {}

    def toggle(playing, runs, label, step):
        trace = _find(runs, label)
        if trace is None or not trace.steps:
            gr.Warning("Nothing to play yet: generate a run first.")
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
        playing = not playing
        restart = playing and int(step) >= len(trace.steps) - 1
        return (playing, gr.Timer(active=playing), gr.Button("⏸ Pause" if playing else "▶ Play"),
                0 if restart else gr.skip())

    def tick(runs, label, step):
        trace = _find(runs, label)
        n = len(trace.steps) if trace is not None else 0
        if int(step) + 1 >= n:
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
        return True, gr.skip(), gr.skip(), int(step) + 1

    def show_image(path):
        if not path:
            return gr.Image(value=None, visible=False)
        try:
            picture = open_image(path)
        except ValueError as err:
            gr.Warning(str(err))
            return gr.Image(value=None, visible=False)
        picture.thumbnail((256, 256))
        return gr.Image(value=picture, visible=True)

    run_inputs = [ui.prompt, ui.image, ui.thinking, ui.seed, *ui.knobs]
    generate = _named(generate, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "runs")
    ui.go.click(generate, [*run_inputs, ui.runs], [ui.canvas, ui.panel, ui.text, ui.status, ui.step, ui.inspector,
                                                   ui.heat, ui.settle, ui.accepted, ui.timeline, ui.trace_file,
                                                   ui.runs, ui.picker], api_name="generate", show_progress="hidden")
    ui.prompt.submit(generate, [*run_inputs, ui.runs], [ui.canvas, ui.panel, ui.text, ui.status, ui.step,
                                                        ui.inspector, ui.heat, ui.settle, ui.accepted, ui.timeline,
                                                        ui.trace_file, ui.runs, ui.picker], show_progress="hidden",
                     api_visibility="private")
    ui.stop.click(ui.stop_runs, None, ui.status, api_name="stop", queue=False)
    replay_io = dict(inputs=[ui.runs, ui.picker, ui.step, ui.show, ui.pos], outputs=[ui.canvas, ui.panel, ui.inspector],
                     show_progress="hidden")
    ui.step.change(replay, api_name="replay", **replay_io)
    ui.show.change(replay, api_visibility="private", **replay_io)
    ui.pos.change(replay, api_visibility="private", **replay_io)
    ui.picker.input(pick, [ui.runs, ui.picker, ui.show, ui.pos],
                    [ui.canvas, ui.panel, ui.text, ui.step, ui.inspector, ui.heat, ui.settle, ui.accepted,
                     ui.timeline, ui.trace_file], api_visibility="private")
    ui.play.click(toggle, [ui.playing, ui.runs, ui.picker, ui.step], [ui.playing, ui.timer, ui.play, ui.step],
                  api_visibility="private")
    ui.timer.tick(tick, [ui.runs, ui.picker, ui.step], [ui.playing, ui.timer, ui.play, ui.step],
                  api_visibility="private", show_progress="hidden")
    ui.image.change(show_image, ui.image, ui.preview, api_visibility="private")
    ab_view(loaded, ui, run_inputs)


def ab_view(loaded, ui, run_inputs):
    """A/B: run A with the settings, run B with one knob changed; same prompt and seed, drawn side by side."""
    tok = loaded.tokenizer

    def ab(prompt, image, thinking, seed, *rest, request: gr.Request):
        *knobs, knob, value, runs = rest
        inputs, config_a, seed, _ = _prepare(loaded, prompt, image, thinking, seed, knobs)
        try:
            config_b = live.config_from_values(config_a, {knob: value})
        except (ValueError, TypeError) as err:
            raise _error(err) from None
        if config_b == config_a:
            gr.Warning(f"B sets {knob} = {value}, the same as A: both runs will match.")
        a = live.diffusion_run(loaded, inputs, config_a, seed, label="A").start()
        b = live.diffusion_run(loaded, inputs, config_b, seed, label="B").start()  # runs after A (RNG lock)
        ui.sessions.add(request.session_hash if request else "", a, b)
        titles = (f"A: {knob} = {getattr(config_a, knob)}", f"B: {knob} = {getattr(config_b, knob)}")
        try:
            for fa, fb in live.watch([a, b], FPS):
                yield {ui.ab_box: gr.Accordion(visible=True),
                       ui.ab_a: render.canvas_html(fa, tok, title=titles[0]) + render.text_view_html(fa, tok),
                       ui.ab_b: render.canvas_html(fb, tok, title=titles[1]) + render.text_view_html(fb, tok)}
        finally:
            a.stop(), b.stop()
        rows = ["| | tokens | steps | canvases | NFE | TPF | wall (s) |", "|---|---|---|---|---|---|---|"]
        for title, trace in zip(titles, (fa, fb)):
            m = trace.metrics()
            rows.append(f"| {title} | {m['tokens']} | {m['total_steps']} | {m['canvases']} | {m['nfe']} | "
                        f"{m['tpf']:.2f} | {m['wall_s']:.2f} |")
        same = "identical" if fa.token_ids == fb.token_ids else "different"
        for tag, trace in (("A", fa), ("B", fb)):
            runs = _keep(runs, _label(runs, prompt, trace, f" {tag}"), trace)
        yield {ui.ab_summary: "\n".join(rows) + f"\n\nThe two outputs are **{same}**.", ui.runs: runs,
               ui.picker: gr.Dropdown([r["label"] for r in runs], value=runs[-1]["label"])}

    ab = _named(ab, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "b_knob", "b_value", "runs")
    ui.ab_go.click(ab, [*run_inputs, ui.ab_knob, ui.ab_value, ui.runs],
                   [ui.ab_box, ui.ab_a, ui.ab_b, ui.ab_summary, ui.runs, ui.picker], api_name="ab",
                   show_progress="hidden")


def _stats_md(stats: dict) -> str:
    return "\n".join(["| metric | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in stats.items())])


def race_view(loaded, ui, ar_model):
    """Diffusion vs AR on one prompt, started together, both drawn live; tokens-vs-time chart at the end."""
    tok = loaded.tokenizer
    ar_name = f"AR: {ar_model.source} via generate()" if ar_model else "AR: same weights, one token per forward"
    gr.Markdown("Both sides start together on the same prompt and the Generate tab's settings. "
                "TPF = tokens / (steps + K − 1) (report §3.4); tok/s = generated tokens / wall time. "
                "On one device both runs share it, so each slows the other a little.")
    with gr.Row():
        ui.race_prompt = gr.Textbox("What is 487 + 356?", label="Prompt", scale=4)
        ui.race_thinking = gr.Checkbox(label="Thinking", scale=1)
        ui.race_go = gr.Button("Race", variant="primary", scale=1)
        ui.race_stop = gr.Button("Stop", variant="stop", scale=1)
    ui.race_status = gr.Markdown()
    with gr.Row():
        with gr.Column():
            gr.Markdown("### Diffusion (entropy-bound sampler)")
            ui.d_canvas, ui.d_stats, ui.d_text = gr.HTML(), gr.Markdown(), gr.HTML()
        with gr.Column():
            gr.Markdown(f"### {ar_name}")
            ui.a_canvas, ui.a_stats, ui.a_text = gr.HTML(), gr.Markdown(), gr.HTML()
    ui.race_chart = gr.Plot(label="Tokens vs wall time")
    ui.speedup = gr.Markdown()

    def sides(d, a, contest) -> dict:
        return {ui.d_canvas: render.canvas_html(d, tok), ui.d_stats: _stats_md(race.side_stats(d)),
                ui.d_text: render.text_view_html(d, tok), ui.a_stats: _stats_md(race.side_stats(a)),
                ui.a_canvas: render.canvas_html(a, contest.ar_tokenizer),
                ui.a_text: render.text_view_html(a, contest.ar_tokenizer),
                ui.race_status: "racing…" if not (d.done and a.done) else "finished"}

    def run_race(prompt, thinking, seed, *rest, request: gr.Request):
        *knobs, runs = rest
        inputs, config, seed, _ = _prepare(loaded, prompt, None, thinking, seed, knobs)
        contest = race.start_race(loaded, prompt, inputs=inputs, thinking=bool(thinking), config=config, seed=seed,
                                  ar_model=ar_model)
        ui.sessions.add(request.session_hash if request else "", contest.diffusion, contest.ar)
        try:
            for d, a in contest.frames(FPS):
                yield sides(d, a, contest)
        finally:
            contest.stop()
        for run in (contest.diffusion, contest.ar):
            _notify(run, run.trace)
        x = race.speedup(d, a)
        summary = f"**Speedup** (effective tok/s, diffusion ÷ AR): **{x:.2f}×**" if x else "Speedup: n/a"
        runs = _keep(runs, _label(runs, prompt, d, " race"), d)
        yield {**sides(d, a, contest), ui.race_chart: plots.race_chart(d, a), ui.speedup: summary, ui.runs: runs,
               ui.picker: gr.Dropdown([r["label"] for r in runs], value=runs[-1]["label"])}

    run_race = _named(run_race, "prompt", "thinking", "seed", *KNOB_NAMES, "runs")
    ui.race_go.click(run_race, [ui.race_prompt, ui.race_thinking, ui.seed, *ui.knobs, ui.runs],
                     [ui.d_canvas, ui.d_stats, ui.d_text, ui.a_canvas, ui.a_stats, ui.a_text, ui.race_status,
                      ui.race_chart, ui.speedup, ui.runs, ui.picker], api_name="race", show_progress="hidden")
    ui.race_stop.click(ui.stop_runs, None, ui.race_status, queue=False, api_visibility="private")


def learn_view(loaded, ui):
    """Forward-process explorer, a walkthrough of one sampler step, and exports of the selected run."""
    tok = loaded.tokenizer
    vocab = loaded.model.config.text_config.vocab_size
    gr.Markdown("### Forward process: noise a sentence\nTraining corrupts each canvas token, independently with "
                "probability *t*, into a uniform random token (no mask token; report §3.1).")
    with gr.Row():
        ui.l_prompt = gr.Textbox("Write one sentence about a bear named Alice who likes honey.", label="Prompt")
        ui.l_sentence = gr.Textbox("Alice the bear loves to eat honey every day.", label="Answer to noise")
    with gr.Row():
        ui.l_t = gr.Slider(0, 1, value=0.5, step=0.01, label="t (noise level)", scale=3)
        ui.l_seed = gr.Number(0, label="noise seed", precision=0, scale=1)
        ui.l_ask = gr.Button("Ask the model: one denoising prediction", scale=2)
    ui.l_noisy = gr.HTML()
    ui.l_pred = gr.HTML()
    ui.l_ids = gr.State(None)

    def noise(sentence, t, seed):
        ids = tok.encode(sentence or "", add_special_tokens=False)[: loaded.model.config.canvas_length]
        if not ids:
            raise gr.Error("Type a sentence to noise.")
        noisy, replaced = learn.corrupt(ids, float(t), vocab, seed=int(seed or 0))
        return _token_row(tok, noisy, replaced, ids, "replaced"), {"clean": ids, "noisy": noisy}

    def ask(prompt, state):
        if not state:
            raise gr.Error("Noise a sentence first.")
        try:
            out = learn.denoise_once(loaded.model, loaded.processor, prompt, state["noisy"])
        except ValueError as err:
            raise _error(err) from None
        clean = state["clean"]
        argmax = out["argmax"][: len(clean)]
        right = [a == c for a, c in zip(argmax, clean)]
        return (f"<p>τ = {out['temperature']:.2f}; the model recovers {sum(right)}/{len(clean)} tokens in one "
                f"pass (green = matches the clean sentence).</p>" + _token_row(tok, argmax, right, clean, "recovered"))

    ui.l_t.change(noise, [ui.l_sentence, ui.l_t, ui.l_seed], [ui.l_noisy, ui.l_ids], api_name="noise",
                  show_progress="hidden")
    for event in (ui.l_sentence.submit, ui.l_seed.change):
        event(noise, [ui.l_sentence, ui.l_t, ui.l_seed], [ui.l_noisy, ui.l_ids], api_visibility="private")
    ui.l_ask.click(ask, [ui.l_prompt, ui.l_ids], ui.l_pred, api_name="denoise")

    gr.Markdown("### One sampler step, stage by stage\nThe real numbers of the run and step picked in the "
                "Generate tab's replay.")
    ui.l_stage = gr.Radio(list(learn.STAGES), value=learn.STAGES[0], label="Stage (Algorithm 1)")
    ui.l_title, ui.l_html, ui.l_numbers = gr.Markdown(), gr.HTML(max_height=420), gr.JSON(label="numbers")

    def walk(runs, label, step, stage):
        trace = _find(runs, label)
        if trace is None or not trace.steps:
            return "Generate a run first: the walkthrough explains one of its steps.", "", None
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        stages = {s["stage"]: s for s in learn.walkthrough(trace, tok, step)}
        s = stages[stage]
        rec = trace.steps[step]
        return f"**{label}** · canvas {rec.canvas + 1}, step {rec.step} · **{s['title']}**", s["html"], s["numbers"]

    for event in (ui.l_stage.change, ui.step.change, ui.runs.change):
        event(walk, [ui.runs, ui.picker, ui.step, ui.l_stage], [ui.l_title, ui.l_html, ui.l_numbers],
              api_visibility="private", show_progress="hidden")

    gr.Markdown("### Export the selected run")
    ui.l_export = gr.Button("Export JSON, GIF and HTML replay")
    with gr.Row():
        ui.f_json, ui.f_gif, ui.f_html = gr.File(label="trace.json"), gr.File(label="run.gif"), gr.File(label="replay.html")

    def export_run(runs, label):
        trace = _find(runs, label)
        if trace is None:
            raise gr.Error("Nothing to export yet: generate a run first.")
        folder = Path(tempfile.mkdtemp(prefix="dg-export-"))
        return (str(export.trace_json(trace, folder / "trace.json")), str(export.trace_gif(trace, tok, folder / "run.gif")),
                str(export.trace_html(trace, tok, folder / "replay.html")))

    ui.l_export.click(export_run, [ui.runs, ui.picker], [ui.f_json, ui.f_gif, ui.f_html], api_name="export")


def _token_row(tokenizer, ids, marks, clean, what) -> str:
    """Tokens as cells: marked ones coloured, with the clean token in the tooltip."""
    cells = []
    for pos, (token_id, mark) in enumerate(zip(ids, marks)):
        state = ("accepted" if what == "recovered" else "changed") if mark else "noise"
        tip = f"#{pos} {render.token_piece(tokenizer, token_id)} (clean: {render.token_piece(tokenizer, clean[pos])})"
        cells.append(f'<span class="dg-cell" style="display:inline-block;margin:2px;'
                     f'background:{render.STATE_COLORS[state]}33;border-color:{render.STATE_COLORS[state]}" '
                     f'title="{tip}">{html.escape(render.token_piece(tokenizer, token_id))}</span>')
    return render.CSS + f'<div class="dg-view">{"".join(cells)}<div class="dg-muted">{sum(marks)}/{len(marks)} ' \
                        f'{what}</div></div>'


def build_app(loaded, ar_model=None, concurrency: int = 8) -> gr.Blocks:
    """The whole demo on one loaded DiffusionGemma (and an optional separate AR model), queue enabled."""
    ui = SimpleNamespace(sessions=live.Sessions())

    def stop_runs(request: gr.Request):
        n = ui.sessions.stop(request.session_hash if request else "")
        return "Stopping… what was produced so far stays in the replay." if n else "Nothing is running."

    ui.stop_runs = stop_runs
    with gr.Blocks(title="DiffusionGemma, step by step") as demo:
        gr.Markdown(f"# DiffusionGemma, step by step\n`{loaded.describe()}`")
        ui.runs = gr.State([])
        with gr.Tab("Generate"):
            generate_view(loaded, ui)
        with gr.Tab("Race"):
            race_view(loaded, ui, ar_model)
        with gr.Tab("Learn"):
            learn_view(loaded, ui)
    return demo.queue(default_concurrency_limit=concurrency)


def main() -> None:
    from dg.loading import load

    parser = argparse.ArgumentParser(description="Watch DiffusionGemma denoise its canvas.")
    parser.add_argument("--model", default=None, help="checkpoint folder or cached hub id (default: embedded tiny)")
    parser.add_argument("--ar-model", default=None, help="a separate causal LM to race through generate()")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--share", action="store_true")
    args = parser.parse_args()
    loaded = load(args.model)
    live.share_cpu(loaded.device)
    ar_model = race.load_ar_model(args.ar_model) if args.ar_model else None
    print(loaded.describe())
    build_app(loaded, ar_model).launch(server_port=args.port, share=args.share, max_file_size=MAX_UPLOAD)


if __name__ == "__main__":
    main()
