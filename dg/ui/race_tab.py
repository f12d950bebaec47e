"""The Race tab: diffusion, AR and hybrid decoding started together on one prompt, all three drawn live.

Every lane runs with the Generate tab's settings and seed (dg.engine.race). A new race clears the last
one's chart and result first; when all have finished, the tokens-vs-time chart and one line name the
fastest lane whose answer is right (for a skill example, each answer is checked against the reference).
The diffusion and hybrid lanes join the session's history. The default prompt is a sum of three numbers
with thinking on, where the lanes differ: diffusion is fast but errs more often on the trace, AR is
right but one token per forward, hybrid gives AR's tokens at a draft's pace.

    python app.py [--ar-model DIR_OR_ID]   # then the Race tab
"""

import gradio as gr

from dg.engine import race
from dg.ui.common import KNOB_NAMES, RunState, picker, prepare, stream, with_api_names
from dg.examples import SkillExamples
from dg.ui.generate_tab import GenerateTab, run_meta
from dg.view import plots, render, tables

EXPLAINER = ("The three lanes start together on the same prompt with the Generate tab's settings and seed, and count "
             "tokens the same way (pad is never output). Hybrid lets the sampler draft and AR verify, so its tokens "
             "are greedy AR's. TPF = tokens / (steps + K − 1) for diffusion (report §3.4; transformers omits the "
             "K − 1), tokens / NFE for hybrid; tok/s = generated tokens / wall time; TTFT = time to the first "
             "committed token. All three share one device.")
HYBRID = "Hybrid: the sampler drafts, AR verifies"


def _lane(title: str) -> tuple:
    """One lane's heading, canvas, stats table and text."""
    gr.Markdown(f"### {title}")
    return gr.HTML([], html_template=render.PARTS_TEMPLATE), gr.Markdown(), gr.HTML()


def build(loaded, shared: RunState, generate: GenerateTab, ar_model=None) -> None:
    """Prompt row, the three lanes side by side, then the result line and the chart."""
    tok = loaded.tokenizer
    reference = SkillExamples.load()
    example = reference.race_example()
    ar_name = f"AR: {ar_model.source} via generate()" if ar_model else "AR: same weights, one token per forward"
    hybrid_name = f"{HYBRID}, on the diffusion model's own weights (not {ar_model.source})" if ar_model else HYBRID
    gr.Markdown(EXPLAINER)
    with gr.Row():
        prompt = gr.Textbox(example.prompt, label="Prompt", scale=4)
        thinking = gr.Checkbox(example.thinking, label="Thinking", scale=1)
        go = gr.Button("Race", variant="primary", scale=1)
        stop = gr.Button("Stop", variant="stop", scale=1)
    status = gr.Markdown()
    with gr.Row():
        with gr.Column(min_width=300):
            d_views = _lane("Diffusion: entropy-bound sampler")
        with gr.Column(min_width=300):
            a_views = _lane(ar_name)
        with gr.Column(min_width=300):
            h_views = _lane(hybrid_name)
    result = gr.Markdown(elem_id="dg-race-result")
    chart = gr.Plot(label="Tokens vs wall time")

    def lanes(d, a, h, ar_tok) -> dict:
        views = {status: "finished" if d.done and a.done and h.done else "racing…"}
        for (canvas, stats, text), trace, tokenizer in ((d_views, d, tok), (a_views, a, ar_tok), (h_views, h, tok)):
            views |= {canvas: render.canvas_parts(trace, tokenizer), stats: tables.side_table(trace),
                      text: render.text_view_html(trace, tokenizer)}
        return views

    async def run_race(prompt, thinking, seed, *rest, request=None):
        *knobs, history = rest
        inputs, config, seed = prepare(loaded, prompt, None, thinking, seed, knobs)
        yield {chart: None, result: "", status: "racing…"}  # the last race's result goes before this one runs
        contest = race.start_race(loaded, prompt, inputs=inputs, thinking=bool(thinking), config=config, seed=seed,
                                  ar_model=ar_model)
        draw = lambda d, a, h: lanes(d, a, h, contest.ar_tokenizer)  # noqa: E731
        async for update in stream(shared, request, list(contest.lanes.values()), draw):
            yield update
        d, a, h = (lane.snapshot() for lane in contest.lanes.values())
        traces = {"diffusion": d, "AR": a, "hybrid": h}
        tokenizers = {"diffusion": tok, "AR": contest.ar_tokenizer, "hybrid": tok}
        checks = {name: reference.check(prompt, None, trace, tokenizers[name]) for name, trace in traces.items()}
        meta = run_meta(loaded, prompt, None, thinking, seed)
        history = history.keep(prompt, d, " race", meta).keep(prompt, h, " race hybrid", meta)
        yield {**draw(d, a, h), chart: plots.race_chart(traces), shared.history: history,
               result: tables.verdict(traces, checks), generate.picker: picker(history, select=False)}

    run_race = with_api_names(run_race, "prompt", "thinking", "seed", *KNOB_NAMES, "runs")
    go.click(run_race, [prompt, thinking, generate.settings.seed, *generate.settings.knobs, shared.history],
             [*d_views, *a_views, *h_views, status, chart, result, shared.history, generate.picker], api_name="race",
             show_progress="hidden")
    stop.click(shared.stop, None, status, queue=False, api_visibility="private")
