"""The dg demo: watch DiffusionGemma denoise its canvas, race it against AR decoding, learn how it works.

Only UI lives here: each view builds its components and wires events to dg (dg.live runs the sampler
in a background thread and the UI polls the growing trace; dg.render / dg.plots / dg.export /
dg.learn draw and explain it).

    python app.py [--model DIR_OR_ID] [--ar-model DIR_OR_ID] [--port N] [--share]
"""

import argparse
import html
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

from dg import export, learn, live, plots, race, render
from dg.config import KNOBS
from dg.prompts import open_image
from dg.trace import Trace

FPS = live.DEFAULT_FPS  # live frames per second at most; the replay keeps every step
MAX_UPLOAD = "20mb"
RUNS_TTL_S = 6 * 3600  # a session's replays are dropped this long after its last change
EXAMPLES_DIR = Path(__file__).resolve().parent / "assets" / "examples"
KNOB_NAMES = [k.name for k in KNOBS]
EXAMPLES = {name: [[prompt, str(EXAMPLES_DIR / image) if image else None, thinking]
                   for prompt, image, thinking in rows]
            for name, rows in json.loads((EXAMPLES_DIR / "examples.json").read_text()).items() if name != "_comment"}
# Clicking a canvas cell writes its data-pos into the inspector's position box.
CLICK_JS = """element.addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pos]');
  const box = document.querySelector('#dg-pos input');
  if (!cell || !box) return;
  box.value = cell.dataset.pos;
  box.dispatchEvent(new Event('input', {bubbles: true}));
});"""


def _canvas(trace, tokenizer, step=None, **kwargs) -> str:
    return _bare(render.canvas_html(trace, tokenizer, step, **kwargs))


def _panel(trace, step=None) -> str:
    return _bare(render.step_panel_html(trace, step))


def _text(trace, tokenizer) -> str:
    return _bare(render.text_view_html(trace, tokenizer))


def _bare(view: str) -> str:
    """A view without its <style> block: the legend brings render.CSS to the page once, so frames stay small."""
    return view.replace(render.CSS, "")


def _prepare(loaded, prompt, image, thinking, seed, knobs):
    try:
        return live.prepare_run(loaded, prompt, image, thinking, seed, dict(zip(KNOB_NAMES, knobs)))
    except (ValueError, TypeError) as err:
        raise gr.Error(str(err), title="Can't run that") from None


def _named(fn, *names):
    """`fn(*values, request=...)` as an async generator with one named parameter per input: the API names each knob."""

    async def named(*args):
        *values, request = args
        async for update in fn(*values, request=request):
            yield update

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(n, kind) for n in names]
    named.__signature__ = inspect.Signature([*params, inspect.Parameter("request", kind, default=None,
                                                                        annotation=gr.Request)])
    named.__annotations__ = {"request": gr.Request}  # Gradio finds the request parameter by its type hint
    return named


def _session(request) -> str:
    return request.session_hash if request is not None else ""


def _notify(run):
    if run.error:
        gr.Warning(f"The run failed: {run.error}. What it produced so far is kept.")
    elif run.trace.end is not None and run.trace.end.finish_reason == "cancelled":
        gr.Info(f"Stopped after {len(run.trace.steps or run.trace.tokens)} steps; the partial run is kept.")


def _picker(runs, select: bool = True) -> gr.Dropdown:
    """The run picker listing `runs`; `select` shows the newest (else the shown run stays selected)."""
    labels = [r["label"] for r in runs]
    return gr.Dropdown(labels, value=labels[-1]) if select and labels else gr.Dropdown(labels)


def generate_view(loaded, ui):
    """Prompt + settings on the left; live canvas, step panel, replay and inspector on the right; plots below."""
    tok = loaded.tokenizer
    with gr.Row():
        with gr.Column(scale=2, min_width=340):
            ui.prompt = gr.Textbox(label="Prompt", lines=2, placeholder="Ask something, or pick an example below")
            with gr.Row():
                ui.image = gr.File(label="Image (optional)", file_types=["image"], type="filepath", height=110)
                ui.preview = gr.Image(label="Image", interactive=False, height=110, visible=False)
            ui.thinking = gr.Checkbox(label="Thinking", info="<|think|>: a thought channel first, then the answer")
            with gr.Row():
                ui.go = gr.Button("Generate", variant="primary", elem_id="dg-go")
                ui.stop = gr.Button("Stop", variant="stop")
            with gr.Accordion("Sampler settings and A/B", open=False):
                cfg = loaded.sampler_config
                ui.knobs = [gr.Slider(k.low, k.high, value=getattr(cfg, k.name), step=k.step, label=k.name,
                                      info=k.help) for k in KNOBS]
                ui.seed = gr.Number(0, label="seed", precision=0, info="torch.manual_seed(seed) right before the run")
                gr.Markdown("**A/B**: the same prompt and seed with one knob changed, side by side.")
                with gr.Row():
                    ui.ab_knob = gr.Dropdown(KNOB_NAMES, value="entropy_bound", label="knob")
                    ui.ab_value = gr.Number(0.5, label="B value")
                ui.ab_go = gr.Button("Run A/B")
            gr.Examples(EXAMPLES["tiny"], [ui.prompt, ui.image, ui.thinking], label="The embedded tiny model's skills")
            gr.Examples(EXAMPLES["general"], [ui.prompt, ui.image, ui.thinking], label="General (released model)")
        with gr.Column(scale=3):
            ui.status = gr.Markdown("Pick an example or type a prompt, then **Generate**.", elem_id="dg-status")
            gr.HTML(render.legend_html())
            ui.panel = gr.HTML(_panel(Trace()))
            ui.canvas = gr.HTML(_canvas(Trace(), tok), elem_id="dg-canvas", js_on_load=CLICK_JS)
            ui.text = gr.HTML()
            with gr.Row():
                ui.picker = gr.Dropdown([], label="Run (every run of this session keeps its replay)", scale=3)
                ui.show = gr.Radio(list(render.SHOWS), value="argmax", label="cells show", scale=2)
                ui.play = gr.Button("▶ Play", scale=1)
            ui.step = gr.Slider(0, 1, value=0, step=1, label="Replay: step (all canvases in order)")
            with gr.Row():
                ui.pos = gr.Number(0, label="Inspect position (click a cell)", precision=0, elem_id="dg-pos",
                                   minimum=0, scale=1)
                ui.inspector = gr.HTML(scale=3)
    ui.timer, ui.playing = gr.Timer(0.125, active=False), gr.State(False)
    with gr.Accordion("A/B result", visible=False) as ui.ab_box:
        with gr.Row():
            ui.ab_a, ui.ab_b = gr.HTML(), gr.HTML()
        ui.ab_summary = gr.Markdown()
    with gr.Row():
        ui.heat, ui.settle = gr.Plot(label="Entropy heatmap"), gr.Plot(label="Settle step")
    with gr.Row():
        ui.accepted, ui.timeline = gr.Plot(label="Accepted per step"), gr.Plot(label="Canvas timeline")
    ui.trace_file = gr.File(label="Trace of the selected run (JSON)", interactive=False)

    def inspect_at(trace, step, pos):
        if not trace.steps:
            return ""
        pos = min(max(int(pos or 0), 0), len(trace.steps[0].argmax) - 1)
        return _bare(render.inspector_html(trace, tok, min(max(int(step), 0), len(trace.steps) - 1), pos))

    def run_view(trace, show="argmax", pos=0) -> dict:
        """One finished run: its last step, its text, the slider over all its steps, its trace file."""
        last = len(trace.steps) - 1 if trace.steps else None
        return {ui.canvas: _canvas(trace, tok, last, show=show), ui.panel: _panel(trace, last),
                ui.text: _text(trace, tok), ui.inspector: inspect_at(trace, last or 0, pos),
                ui.step: gr.Slider(maximum=max(last or 0, 1), value=last or 0),
                ui.trace_file: str(export.trace_json(trace, live.scratch_dir() / "trace.json"))}

    def show_plots(runs, label):
        trace = live.find_run(runs, label)
        if trace is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return (plots.entropy_heatmap(trace), plots.settle_steps(trace), plots.accepted_per_step(trace),
                plots.canvas_timeline(trace, tok))

    async def generate(prompt, image, thinking, seed, *rest, request=None):
        *knobs, runs = rest
        inputs, config, seed = _prepare(loaded, prompt, image, thinking, seed, knobs)
        run = live.diffusion_run(loaded, inputs, config, seed).start()
        ui.sessions.add(_session(request), run)
        shown = {}  # what the page already has: unchanged views are not sent again
        try:
            async for (frame,) in live.awatch([run], FPS):
                views = {ui.canvas: _canvas(frame, tok), ui.panel: _panel(frame), ui.text: _text(frame, tok),
                         ui.status: "running…" if frame.steps else live.waiting_message(run)}
                if update := {c: v for c, v in views.items() if shown.get(c) != v}:
                    yield update
                shown = views
        finally:
            run.stop()  # the page went away or the run ended: stop sampling either way
        _notify(run)
        trace = run.snapshot()
        runs = live.keep_run(runs, prompt, trace)
        yield {**run_view(trace), ui.runs: runs, ui.picker: _picker(runs), ui.status: live.summary(trace)}

    def replay(runs, label, step, show, pos):
        trace = live.find_run(runs, label)
        if trace is None or not trace.steps:
            return gr.skip(), gr.skip(), gr.skip()
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        return (_canvas(trace, tok, step, show=show), _panel(trace, step),
                inspect_at(trace, step, pos))

    def pick(runs, label, show, pos):
        trace = live.find_run(runs, label)
        return run_view(trace, show, pos) if trace is not None else {}

    def toggle(playing, runs, label, step):
        trace = live.find_run(runs, label)
        if trace is None or not trace.steps:
            gr.Warning("Nothing to play yet: generate a run first.")
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
        playing = not playing
        restart = playing and int(step) >= len(trace.steps) - 1
        return (playing, gr.Timer(active=playing), gr.Button("⏸ Pause" if playing else "▶ Play"),
                0 if restart else gr.skip())

    def tick(runs, label, step):
        trace = live.find_run(runs, label)
        if trace is None or int(step) + 1 >= len(trace.steps):
            return False, gr.Timer(active=False), gr.Button("▶ Play"), gr.skip()
        return True, gr.skip(), gr.skip(), int(step) + 1

    def show_image(path):
        try:
            picture = open_image(path) if path else None
        except ValueError as err:
            gr.Warning(str(err))
            picture = None
        if picture is not None:
            picture.thumbnail((256, 256))
        return gr.Image(value=picture, visible=picture is not None)

    run_inputs = [ui.prompt, ui.image, ui.thinking, ui.seed, *ui.knobs]
    generate = _named(generate, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "runs")
    run_outputs = [ui.canvas, ui.panel, ui.text, ui.status, ui.step, ui.inspector, ui.trace_file, ui.runs, ui.picker]
    plot_io = dict(fn=show_plots, inputs=[ui.runs, ui.picker], outputs=[ui.heat, ui.settle, ui.accepted, ui.timeline])
    ui.go.click(generate, [*run_inputs, ui.runs], run_outputs, api_name="generate",
                show_progress="hidden").then(api_name="plots", **plot_io)  # the final canvas first, then plots
    ui.prompt.submit(generate, [*run_inputs, ui.runs], run_outputs, show_progress="hidden",
                     api_visibility="private").then(api_visibility="private", **plot_io)
    ui.stop.click(ui.stop_runs, None, ui.status, api_name="stop", queue=False)
    replay_io = dict(inputs=[ui.runs, ui.picker, ui.step, ui.show, ui.pos], outputs=[ui.canvas, ui.panel, ui.inspector],
                     show_progress="hidden")
    ui.step.change(replay, api_name="replay", **replay_io)
    ui.show.change(replay, api_visibility="private", **replay_io)
    ui.pos.change(replay, api_visibility="private", **replay_io)
    ui.picker.input(pick, [ui.runs, ui.picker, ui.show, ui.pos], run_outputs[:7],
                    api_visibility="private").then(api_visibility="private", **plot_io)
    ui.play.click(toggle, [ui.playing, ui.runs, ui.picker, ui.step], [ui.playing, ui.timer, ui.play, ui.step],
                  api_visibility="private")
    ui.timer.tick(tick, [ui.runs, ui.picker, ui.step], [ui.playing, ui.timer, ui.play, ui.step],
                  api_visibility="private", show_progress="hidden")
    ui.image.change(show_image, ui.image, ui.preview, api_visibility="private")
    ab_events(loaded, ui, run_inputs)


def ab_events(loaded, ui, run_inputs):
    """A/B: A with the settings, B with one knob changed; same prompt and seed (B runs after A: the RNG lock)."""
    tok = loaded.tokenizer

    async def ab(prompt, image, thinking, seed, *rest, request=None):
        *knobs, knob, value, runs = rest
        inputs, config_a, seed = _prepare(loaded, prompt, image, thinking, seed, knobs)
        try:
            config_b = live.config_from_values(config_a, {knob: value})
        except (ValueError, TypeError) as err:
            raise gr.Error(str(err), title="Can't run that") from None
        if config_b == config_a:
            gr.Warning(f"B sets {knob} = {value}, the same as A: both runs will match.")
        a = live.diffusion_run(loaded, inputs, config_a, seed, label="A").start()
        b = live.diffusion_run(loaded, inputs, config_b, seed, label="B").start()
        ui.sessions.add(_session(request), a, b)
        titles = (f"A: {knob} = {getattr(config_a, knob)}", f"B: {knob} = {getattr(config_b, knob)}")
        sides = lambda fa, fb: {ui.ab_box: gr.Accordion(visible=True),  # noqa: E731
                                ui.ab_a: _canvas(fa, tok, title=titles[0]) + _text(fa, tok),
                                ui.ab_b: _canvas(fb, tok, title=titles[1]) + _text(fb, tok)}
        try:
            async for fa, fb in live.awatch([a, b], FPS):
                yield sides(fa, fb)
        finally:
            a.stop(), b.stop()
        for tag, trace in (("A", fa), ("B", fb)):
            runs = live.keep_run(runs, prompt, trace, f" {tag}")
        yield {**sides(fa, fb), ui.ab_summary: live.compare_table(dict(zip(titles, (fa, fb)))), ui.runs: runs,
               ui.picker: _picker(runs, select=False)}

    ab = _named(ab, "prompt", "image", "thinking", "seed", *KNOB_NAMES, "b_knob", "b_value", "runs")
    ui.ab_go.click(ab, [*run_inputs, ui.ab_knob, ui.ab_value, ui.runs],
                   [ui.ab_box, ui.ab_a, ui.ab_b, ui.ab_summary, ui.runs, ui.picker], api_name="ab",
                   show_progress="hidden")


def race_view(loaded, ui, ar_model):
    """Diffusion vs AR on one prompt, started together, both drawn live; tokens-vs-time chart at the end."""
    tok = loaded.tokenizer
    ar_name = f"AR: {ar_model.source} via generate()" if ar_model else "AR: same weights, one token per forward"
    gr.Markdown("Both sides start together on the same prompt with the Generate tab's settings and seed. "
                "TPF = tokens / (steps + K − 1) (report §3.4; transformers omits the K − 1); tok/s = generated "
                "tokens / wall time; TTFT = time to the first committed token. Both share one device.")
    with gr.Row():
        ui.race_prompt = gr.Textbox("What is 487 + 356?", label="Prompt", scale=4)
        ui.race_thinking = gr.Checkbox(label="Thinking", scale=1)
        ui.race_go = gr.Button("Race", variant="primary", scale=1)
        ui.race_stop = gr.Button("Stop", variant="stop", scale=1)
    ui.race_status = gr.Markdown()
    with gr.Row():
        with gr.Column():
            gr.Markdown("### Diffusion: entropy-bound sampler")
            ui.d_canvas, ui.d_stats, ui.d_text = gr.HTML(), gr.Markdown(), gr.HTML()
        with gr.Column():
            gr.Markdown(f"### {ar_name}")
            ui.a_canvas, ui.a_stats, ui.a_text = gr.HTML(), gr.Markdown(), gr.HTML()
    ui.race_chart, ui.speedup = gr.Plot(label="Tokens vs wall time"), gr.Markdown()

    def sides(d, a, ar_tok) -> dict:
        return {ui.d_canvas: _canvas(d, tok), ui.d_stats: race.side_table(d), ui.d_text: _text(d, tok),
                ui.a_canvas: _canvas(a, ar_tok), ui.a_stats: race.side_table(a), ui.a_text: _text(a, ar_tok),
                ui.race_status: "finished" if d.done and a.done else "racing…"}

    async def run_race(prompt, thinking, seed, *rest, request=None):
        *knobs, runs = rest
        inputs, config, seed = _prepare(loaded, prompt, None, thinking, seed, knobs)
        contest = race.start_race(loaded, prompt, inputs=inputs, thinking=bool(thinking), config=config, seed=seed,
                                  ar_model=ar_model)
        ui.sessions.add(_session(request), contest.diffusion, contest.ar)
        try:
            async for d, a in live.awatch([contest.diffusion, contest.ar], FPS):
                yield sides(d, a, contest.ar_tokenizer)
        finally:
            contest.stop()
        _notify(contest.diffusion), _notify(contest.ar)
        x = race.speedup(d, a)
        summary = f"**Speedup** (effective tok/s, diffusion ÷ AR): **{x:.2f}×**" if x else "Speedup: n/a"
        runs = live.keep_run(runs, prompt, d, " race")
        yield {**sides(d, a, contest.ar_tokenizer), ui.race_chart: plots.race_chart(d, a), ui.speedup: summary,
               ui.runs: runs, ui.picker: _picker(runs, select=False)}

    run_race = _named(run_race, "prompt", "thinking", "seed", *KNOB_NAMES, "runs")
    ui.race_go.click(run_race, [ui.race_prompt, ui.race_thinking, ui.seed, *ui.knobs, ui.runs],
                     [ui.d_canvas, ui.d_stats, ui.d_text, ui.a_canvas, ui.a_stats, ui.a_text, ui.race_status,
                      ui.race_chart, ui.speedup, ui.runs, ui.picker], api_name="race", show_progress="hidden")
    ui.race_stop.click(ui.stop_runs, None, ui.race_status, queue=False, api_visibility="private")


def learn_view(loaded, ui):
    """Forward-process explorer, one sampler step stage by stage, and exports of the selected run."""
    tok = loaded.tokenizer
    gr.Markdown("### Forward process: noise an answer\nTraining corrupts each canvas token, independently with "
                "probability *t*, into a uniform random token: no mask token (report §3.1).")
    vocab, canvas_length = loaded.model.config.text_config.vocab_size, loaded.model.config.canvas_length

    def corrupted(sentence, t, seed):
        ids = tok.encode(sentence or "", add_special_tokens=False)[:canvas_length]
        if not ids:
            raise gr.Error("Type an answer to noise.")
        return (ids, *learn.corrupt(ids, float(t), vocab, seed=int(seed or 0)))

    def noise(sentence, t, seed):
        clean, noisy, replaced = corrupted(sentence, t, seed)
        return _token_row(tok, noisy, replaced, clean, "replaced")

    def ask(prompt, sentence, t, seed):
        clean, noisy, _ = corrupted(sentence, t, seed)  # the canvas drawn above: same seed, same noise
        try:
            out = learn.denoise_once(loaded.model, loaded.processor, prompt, noisy)
        except ValueError as err:
            raise gr.Error(str(err)) from None
        right = [a == c for a, c in zip(out["argmax"], clean)]
        return (f"<p>One decoder pass at τ = {out['temperature']:.2f}, no self-conditioning (as step 1): the argmax "
                f"recovers {sum(right)}/{len(clean)} tokens (green).</p>" + _token_row(tok, out["argmax"], right,
                                                                                      clean, "recovered"))

    prompt, answer = EXAMPLES["tiny"][-1][0], "Alice the bear loves to eat honey every day."  # dg/tiny/skills.py story
    with gr.Row():
        ui.l_prompt = gr.Textbox(prompt, label="Prompt")
        ui.l_sentence = gr.Textbox(answer, label="Answer to noise")
    with gr.Row():
        ui.l_t = gr.Slider(0, 1, value=0.5, step=0.01, label="t (noise level)", scale=3)
        ui.l_seed = gr.Number(0, label="noise seed", precision=0, scale=1)
        ui.l_ask = gr.Button("Ask the model for one denoising prediction", scale=2)
    ui.l_noisy, ui.l_pred = gr.HTML(noise(answer, 0.5, 0)), gr.HTML()
    noise_io = dict(inputs=[ui.l_sentence, ui.l_t, ui.l_seed], outputs=ui.l_noisy)
    ui.l_t.change(noise, api_name="noise", show_progress="hidden", **noise_io)
    ui.l_sentence.submit(noise, api_visibility="private", **noise_io)
    ui.l_seed.change(noise, api_visibility="private", **noise_io)
    ui.l_ask.click(ask, [ui.l_prompt, ui.l_sentence, ui.l_t, ui.l_seed], ui.l_pred, api_name="denoise")

    gr.Markdown("### One sampler step, stage by stage\nThe real numbers of the run and step picked in the Generate "
                "tab's replay (Algorithm 1: decode, temperature, entropy, sort + bound, accept, renoise).")
    ui.l_stage = gr.Radio(list(learn.STAGES), value=learn.STAGES[0], label="Stage")
    ui.l_title, ui.l_html, ui.l_numbers = gr.Markdown(), gr.HTML(max_height=420), gr.JSON(label="numbers")

    def walk(runs, label, step, stage):
        trace = live.find_run(runs, label)
        if trace is None or not trace.steps:
            return "Generate a run first: the walkthrough explains one of its steps.", "", None
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        s = {s["stage"]: s for s in learn.walkthrough(trace, tok, step)}[stage]
        rec = trace.steps[step]
        return f"**{label}** · canvas {rec.canvas + 1}, step {rec.step} · **{s['title']}**", s["html"], s["numbers"]

    for event in (ui.l_stage.change, ui.step.change, ui.runs.change):
        event(walk, [ui.runs, ui.picker, ui.step, ui.l_stage], [ui.l_title, ui.l_html, ui.l_numbers],
              api_visibility="private", show_progress="hidden")

    gr.Markdown("### Export the selected run")
    ui.l_export = gr.Button("Export trace JSON, animated GIF and HTML replay")
    with gr.Row():
        ui.f_json, ui.f_gif, ui.f_html = (gr.File(label=name) for name in ("trace.json", "run.gif", "replay.html"))

    def export_run(runs, label):
        trace = live.find_run(runs, label)
        if trace is None:
            raise gr.Error("Nothing to export yet: generate a run first.")
        folder = live.scratch_dir()
        return (str(export.trace_json(trace, folder / "trace.json")),
                str(export.trace_gif(trace, tok, folder / "run.gif")),
                str(export.trace_html(trace, tok, folder / "replay.html")))

    ui.l_export.click(export_run, [ui.runs, ui.picker], [ui.f_json, ui.f_gif, ui.f_html], api_name="export")


def _token_row(tokenizer, ids, marks, clean, what) -> str:
    """Tokens as cells, the marked ones coloured; the clean token in each tooltip."""
    cells = []
    for pos, (token_id, mark) in enumerate(zip(ids, marks)):
        color = render.STATE_COLORS[("accepted" if what == "recovered" else "changed") if mark else "noise"]
        tip = f"#{pos} {render.token_piece(tokenizer, token_id)} (clean: {render.token_piece(tokenizer, clean[pos])})"
        cells.append(f'<span class="dg-cell" style="display:inline-block;margin:2px;background:{color}33;'
                     f'border-color:{color}" title="{html.escape(tip)}">'
                     f"{html.escape(render.token_piece(tokenizer, token_id))}</span>")
    return (f'<div class="dg-view">{"".join(cells)}'
            f'<div class="dg-muted">{sum(marks)}/{len(marks)} {what}</div></div>')


def build_app(loaded, ar_model=None, concurrency: int = 8) -> gr.Blocks:
    """The whole demo on one loaded DiffusionGemma (and an optional separate AR model), queue enabled."""
    ui = SimpleNamespace(sessions=live.Sessions())

    def stop_runs(request: gr.Request):
        n = ui.sessions.stop(_session(request))
        return "Stopping… what was produced so far stays in the replay." if n else "Nothing is running."

    ui.stop_runs = stop_runs
    with gr.Blocks(title="DiffusionGemma, step by step") as demo:
        gr.Markdown(f"# DiffusionGemma, step by step\n`{loaded.describe()}`")
        ui.runs = gr.State([], time_to_live=RUNS_TTL_S)  # this session's finished runs, for the replay
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
    try:
        loaded = load(args.model)
        ar_model = race.load_ar_model(args.ar_model) if args.ar_model else None
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"app.py: {err}") from None
    live.share_cpu(loaded.device)
    print(loaded.describe())
    build_app(loaded, ar_model).launch(server_port=args.port, share=args.share, max_file_size=MAX_UPLOAD)


if __name__ == "__main__":
    main()
