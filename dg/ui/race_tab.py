"""The Race tab: diffusion and AR decoding started together on one prompt, both drawn live.

Both sides run with the Generate tab's settings and seed (dg.engine.race). A new race clears the last
one's chart and result first; when both have finished, the tokens-vs-time chart and one line say who
won, by how much, and (for a skill example) whether each answer matches the reference. The diffusion
side joins the session's history. The default prompt is a long-answer skill of the embedded model,
where a canvas of tokens per few steps should beat one token per forward.

    python app.py [--ar-model DIR_OR_ID]   # then the Race tab
"""

import gradio as gr

from dg.engine import race
from dg.ui.common import KNOB_NAMES, RunState, picker, prepare, stream, with_api_names
from dg.tiny.examples import SkillExamples
from dg.ui.generate_tab import GenerateTab, run_meta
from dg.view import plots, render, tables

EXPLAINER = ("Both sides start together on the same prompt with the Generate tab's settings and seed, and count "
             "tokens the same way (pad is never output). TPF = tokens / (steps + K − 1) (report §3.4; transformers "
             "omits the K − 1); tok/s = generated tokens / wall time; TTFT = time to the first committed token. "
             "Both share one device.")


def _side(title: str) -> tuple:
    """One side's heading, canvas, stats table and text."""
    gr.Markdown(f"### {title}")
    return gr.HTML([], html_template=render.PARTS_TEMPLATE), gr.Markdown(), gr.HTML()


def build(loaded, shared: RunState, generate: GenerateTab, ar_model=None) -> None:
    """Prompt row, the two sides next to each other, then the result line and the chart."""
    tok = loaded.tokenizer
    reference = SkillExamples.load()
    ar_name = f"AR: {ar_model.source} via generate()" if ar_model else "AR: same weights, one token per forward"
    gr.Markdown(EXPLAINER)
    with gr.Row():
        prompt = gr.Textbox(reference.race_prompt(), label="Prompt", scale=4)
        thinking = gr.Checkbox(label="Thinking", scale=1)
        go = gr.Button("Race", variant="primary", scale=1)
        stop = gr.Button("Stop", variant="stop", scale=1)
    status = gr.Markdown()
    with gr.Row():
        with gr.Column():
            d_views = _side("Diffusion: entropy-bound sampler")
        with gr.Column():
            a_views = _side(ar_name)
    result = gr.Markdown(elem_id="dg-race-result")
    chart = gr.Plot(label="Tokens vs wall time")

    def sides(d, a, ar_tok) -> dict:
        views = {status: "finished" if d.done and a.done else "racing…"}
        for (canvas, stats, text), trace, tokenizer in ((d_views, d, tok), (a_views, a, ar_tok)):
            views |= {canvas: render.canvas_parts(trace, tokenizer), stats: tables.side_table(trace),
                      text: render.text_view_html(trace, tokenizer)}
        return views

    async def run_race(prompt, thinking, seed, *rest, request=None):
        *knobs, history = rest
        inputs, config, seed = prepare(loaded, prompt, None, thinking, seed, knobs)
        yield {chart: None, result: "", status: "racing…"}  # the last race's result goes before this one runs
        contest = race.start_race(loaded, prompt, inputs=inputs, thinking=bool(thinking), config=config, seed=seed,
                                  ar_model=ar_model)
        draw = lambda d, a: sides(d, a, contest.ar_tokenizer)  # noqa: E731
        async for update in stream(shared, request, [contest.diffusion, contest.ar], draw):
            yield update
        d, a = contest.diffusion.snapshot(), contest.ar.snapshot()
        checks = {"diffusion": reference.check(prompt, None, d, tok),
                  "AR": reference.check(prompt, None, a, contest.ar_tokenizer)}
        history = history.keep(prompt, d, " race", run_meta(loaded, prompt, None, thinking, seed))
        yield {**draw(d, a), chart: plots.race_chart(d, a), shared.history: history,
               result: tables.verdict(d, a, checks), generate.picker: picker(history, select=False)}

    run_race = with_api_names(run_race, "prompt", "thinking", "seed", *KNOB_NAMES, "runs")
    go.click(run_race, [prompt, thinking, generate.settings.seed, *generate.settings.knobs, shared.history],
             [*d_views, *a_views, status, chart, result, shared.history, generate.picker], api_name="race",
             show_progress="hidden")
    stop.click(shared.stop, None, status, queue=False, api_visibility="private")
