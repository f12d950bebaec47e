"""Learn's "What diffusion can do" (report §9, §1, §6): self-correction found in a real run, the latency
dial and adaptive computation from the committed sweep, structured output, and an interactive roofline.

The self-correction run plays on its canvas at the Generate tab's Pace, then shows its best revision; the
search runs the model (dg.engine.runs, in turns with every other run); the sweep's
figures come from assets/measurements/sweep.json (`python -m dg.bench.sweep`); the roofline is
dg.roofline's arithmetic, redrawn on every control.

    python app.py   # then the Learn tab
"""

import asyncio
import statistics
import time
from functools import partial

import gradio as gr

from dg import roofline
from dg.engine.runs import LiveRun, prepare_run
from dg.revisions import best_revision, find_revisions, first_with_revision
from dg.examples import EXAMPLES_DIR, load_rows
from dg.ui.common import RUN_TIMEOUT_S, RunState, paced_stream, refusal, refused_input
from dg.view import render
from dg.view import revisions as revisions_view
from dg.view import roofline as roofline_view
from dg.view import sweep_plots

SEARCH_SEEDS = 3  # the bounded search: every shipped example at seeds 0 .. SEARCH_SEEDS − 1
SEARCH_BUDGET_S = 60.0  # no search run starts after this long (a large model's runs take seconds each)
CPU = "this CPU (measured by dg.bench.sweep)"


def build(runner, shared: RunState, pace: gr.Slider) -> None:
    gr.Markdown("## What diffusion can do that AR cannot (report §9)")
    sweep = sweep_plots.load_sweep()
    _self_correction(runner, shared, pace)
    _latency_dial(sweep)
    _structured_output(sweep)
    _roofline(runner, sweep)


def _start(runner, row, seed) -> tuple[LiveRun, int]:
    """One real run of an example row at `seed`, started, and the seed as dg reads it (a ValueError when the
    run cannot be made)."""
    image = str(EXAMPLES_DIR / row.image) if row.image else None
    inputs, config, seed = prepare_run(runner, row.prompt, image, row.thinking, seed, {})
    return LiveRun.of(runner, "diffusion", inputs, config, seed, label=row.prompt).start(), seed


def _run(runner, row, seed: int):
    """One real run of an example row at `seed`, to its end (a trace, or a ValueError saying why not)."""
    return _start(runner, row, seed)[0].result(RUN_TIMEOUT_S, f"the run of {row.prompt!r}")


def _search(runner, rows) -> tuple:
    """The bounded search: the examples at seeds 0 .. SEARCH_SEEDS − 1, no run started after SEARCH_BUDGET_S;
    (first_with_revision's hit or None, runs tried)."""
    started, tried = time.perf_counter(), []

    def runs():
        for s in range(SEARCH_SEEDS):
            for r in rows:
                if time.perf_counter() - started > SEARCH_BUDGET_S:
                    return
                tried.append(r)
                yield f"{r.prompt} · seed {s}", _run(runner, r, s)

    return first_with_revision(runs(), SEARCH_SEEDS * len(rows)), len(tried)


def find_and_show(runner, rows, row, seed) -> tuple[str, str]:
    """Run `row` at `seed` and show its best revision; when it has none, say so and search the examples.
    (Markdown line, HTML view); a ValueError when a run cannot be made."""
    return show_found(runner, rows, _run(runner, row, seed), seed)


def show_found(runner, rows, trace, seed) -> tuple[str, str]:
    """`find_and_show` for a run already made."""
    found = find_revisions(trace)
    head = f"**This run** (seed {seed}): {revisions_view.summary(found)}"
    if not found:
        hit, tried = _search(runner, rows)
        if hit is None:
            return f"{head} None either in {tried} runs of the shipped examples (seeds 0–{SEARCH_SEEDS - 1}).", ""
        label, trace, found, n = hit
        head += f"\n\nSearching the shipped examples: run {n}, **{label}**: {revisions_view.summary(found)}"
    return head, revisions_view.revision_html(trace, runner.tokenizer, best_revision(found))


def _self_correction(runner, shared: RunState, pace: gr.Slider) -> None:
    rows = list(load_rows()["tiny"])
    first = next((r for r in rows if r.thinking), rows[0] if rows else None)  # a trace: the most steps per canvas
    gr.Markdown("### Self-correction: an accepted token, changed later\nThe sampler never freezes a token: one "
                "the entropy bound accepted can be renoised or resampled at a later step, and the committed argmax "
                "can differ from it. `dg.revisions` scans every step of a real run for such revisions.",
                elem_id="dg-learn-selfcorrect")
    with gr.Row():
        prompt = gr.Dropdown([r.prompt for r in rows], value=first and first.prompt, label="Example",
                             scale=3)
        seed = gr.Number(0, label="seed", scale=1)  # no rounding: dg refuses 1.5
        go = gr.Button("Run it and look for revisions", scale=1, elem_id="dg-revisions-go")
    found_line, found_view = gr.Markdown(elem_id="dg-revisions-line"), gr.HTML(elem_id="dg-revisions-view")

    def live(seed, frame, index, pace) -> dict:
        """The run as it plays, on its canvas, before its revisions are looked for."""
        step = pace.index(len(frame.steps)) if index is None else index
        if step is None:
            return {found_line: f"**This run** (seed {seed}): waiting for its first step…"}
        line = f"**This run** (seed {seed}): running… run step {step + 1} of {len(frame.steps)} so far"
        return {found_line: line, found_view: render.canvas_html(frame, runner.tokenizer, step)}

    async def find(choice, seed, pace_ms=0, request: gr.Request = None):
        row = next((r for r in rows if r.prompt == choice), None)
        with refused_input():
            if row is None:
                raise ValueError("pick one of the examples")
            run, seed = _start(runner, row, seed)
        async for update in paced_stream(shared, request, run, partial(live, seed), pace_ms):
            yield update
        if run.error:
            raise refusal(run.error)
        # the search, if this run holds no revision, runs more of the model: off the server's event loop
        line, html = await asyncio.to_thread(partial(show_found, runner, rows, run.snapshot(), seed))
        yield {found_line: line, found_view: html}

    go.click(find, [prompt, seed, pace], [found_line, found_view], api_visibility="private", show_progress="hidden")


def _latency_dial(sweep: dict) -> None:
    gr.Markdown("### Adaptive computation and the latency dial\nEach canvas stops when its draft is stable and "
                "confident, so easy replies take fewer steps than hard ones; `max_denoising_steps` caps the steps, "
                "trading accuracy for time. Measured on the embedded model: " + sweep_plots.dial_line(sweep)
                + "\n\n<small>" + sweep_plots.made_by(sweep) + "</small>", elem_id="dg-learn-dial")
    with gr.Row():
        gr.Plot(sweep_plots.latency_dial(sweep), label="Latency dial")
        gr.Plot(sweep_plots.steps_by_skill(sweep), label="Steps per canvas")


def _structured_output(sweep: dict) -> None:
    s, full = sweep["skills"], str(max(sweep["caps"]))
    line = ", ".join(f"{k} {s[k]['caps'][full]['steps_per_canvas']:.2f} steps per canvas "
                     f"({100 * s[k]['convergence'][0]:.0f}% of its tokens right after step 1)"
                     for k in ("json", "story", "arithmetic") if k in s)
    gr.Markdown("### Structured output settles first\nA JSON record's fields are fixed by the prompt, so its draft is "
                f"right almost at once; the stop rule needs one more step to see it stable. Measured: {line}.",
                elem_id="dg-learn-structured")
    gr.Plot(sweep_plots.convergence(sweep), label="Draft convergence")


def _devices(sweep: dict) -> dict:
    return {**roofline.DEVICES, CPU: roofline.measured_cpu(**sweep["cpu"], threads=sweep["machine"]["threads"])}


def _roofline(runner, sweep: dict) -> None:
    gr.Markdown("### Why diffusion is fast: the roofline\nA pass can go no faster than reading its weights at the "
                "memory bandwidth, nor than its FLOPs at peak. AR reads all its active weights for one token; a "
                "canvas step reads more (every expert its positions touch) for TPF tokens. No efficiency factor: "
                "the measured figures show how far each mode runs from its bound (report §1, §6).",
                elem_id="dg-learn-roofline")
    devices, checks = _devices(sweep), roofline_view.gpu_checks()
    models = {"26B-A4B (release)": roofline.RELEASE, "embedded tiny": roofline.shape_of(runner.model, "embedded tiny")}
    tiny_tpf = statistics.fmean(r["caps"][str(max(sweep["caps"]))]["tpf"] for r in sweep["skills"].values())

    def draw(model_name, device_name, dtype, canvas, tpf, users, experts):
        with refused_input():
            if model_name not in models or device_name not in devices:
                raise ValueError(f"pick a model of {list(models)} and a device of {list(devices)}")
            shape = models[model_name]
            setting = roofline_view.Setting(shape, devices[device_name], dtype, float(tpf), int(users), int(canvas),
                                            min(float(experts), shape.experts))
            measured, note = _measured(shape, device_name, dtype, sweep, checks)
            report = roofline.REPORT["crossover_users"] if shape is roofline.RELEASE else None
            return (roofline_view.bounds_table(setting, measured) + note,
                    roofline_view.roofline_figure(setting, measured), roofline_view.users_figure(setting, report))

    def preset(model_name):
        """A model's own canvas, experts and TPF, and the device its figures were measured on."""
        shape = models.get(model_name, roofline.RELEASE)
        if shape is roofline.RELEASE:
            return "H100 SXM", "fp8", 256, roofline.REPORT["tpf"], gr.Slider(maximum=128, value=84)
        experts = gr.Slider(maximum=shape.experts, value=shape.experts_per_canvas)
        return CPU, "fp32", shape.canvas, round(tiny_tpf, 2), experts

    with gr.Row():
        model = gr.Dropdown(list(models), value="26B-A4B (release)", label="Model")
        device = gr.Dropdown(list(devices), value="H100 SXM", label="Device")
        dtype = gr.Radio(list(roofline.BYTES_PER_PARAM), value="fp8", label="Weights")
    with gr.Row():
        canvas = gr.Slider(16, 1024, value=256, step=16, label="Canvas length C")
        tpf = gr.Slider(1, 64, value=roofline.REPORT["tpf"], step=0.01, label="TPF (tokens per forward)")
        users = gr.Slider(1, 256, value=1, step=1, label="Concurrent users", elem_id="dg-roofline-users")
        experts = gr.Slider(1, 128, value=84, step=1, label="Experts touched per canvas (per layer)")
    opening = draw("26B-A4B (release)", "H100 SXM", "fp8", 256, roofline.REPORT["tpf"], 1, 84)  # the report's case
    table = gr.Markdown(opening[0], elem_id="dg-roofline-table")
    with gr.Row():
        roof, by_users = gr.Plot(opening[1], label="Roofline"), gr.Plot(opening[2], label="Throughput bound")
    controls = [model, device, dtype, canvas, tpf, users, experts]
    model.input(preset, model, [device, dtype, canvas, tpf, experts], api_visibility="private")
    for control in controls:
        control.change(draw, controls, [table, roof, by_users], api_visibility="private", show_progress="hidden")


def _measured(shape, device_name: str, dtype: str, sweep: dict, checks: dict) -> tuple[list, str]:
    """The measured figures that belong to this model, device and precision (the report's, dg's own GPU checks,
    the sweep's on this CPU), and a note when none do."""
    r = roofline.REPORT
    if shape is roofline.RELEASE and dtype == "bf16" and device_name in checks:
        return roofline_view.check_measured(checks[device_name]), roofline_view.check_note(checks[device_name])
    if shape is roofline.RELEASE and device_name == r["device"] and dtype == r["dtype"]:
        return roofline_view.report_measured(), (f"\n\nThe report's AR + MTP reaches {r['ar_mtp_tok_s']:g} tok/s; "
                                                 f"diffusion beats it up to ~{r['crossover_users']} users (measured).")
    if shape is not roofline.RELEASE and device_name == CPU:
        return roofline_view.cpu_measured(sweep), ("\n\nMeasured on this CPU by `" + sweep["command"] + "` ("
                                                   + sweep["date"][:10] + ").")
    gpus = "".join(f", on an {name} in bf16 (dg's GPU check)" for name in checks)
    return [], ("\n\nMeasured figures exist for the release on an H100 in fp8 (the report)" + gpus + " and for the "
                "embedded model on this CPU (the sweep); pick one of those to place them.")
