"""The Race tab: diffusion, AR and hybrid decoding started together on one prompt, all three drawn live.

Every lane runs with the Generate tab's settings and seed (dg.engine.race). A new race clears the last
one's chart and result first; when all have finished, the tokens-vs-time chart and one line name the
fastest lane whose answer is right (for a skill example, each answer is checked against the reference).
The diffusion and hybrid lanes join the session's history. The default prompt is a sum of three numbers
with thinking on, where the lanes differ: diffusion is fast but errs more often on the trace, AR is
right but one token per forward, hybrid gives AR's tokens at a draft's pace. Each lane's own ✓/✗ stands
under its heading once it has finished. Slow motion replays the race as it ran, that many times slower
(dg.ui.pace.SlowMotion), so a presenter can narrate the moment hybrid gives AR's answer at diffusion's speed.

    python app.py [--ar-model DIR_OR_ID]   # then the Race tab
"""

import gradio as gr

from dg.engine import race
from dg.ui.common import RunState, named_inputs, picker, prepare, refused_input, slowed_stream
from dg.examples import SkillExamples
from dg.ui.generate_tab import GenerateTab, run_meta
from dg.ui.pace import MAX_SLOW_MOTION, SlowMotion
from dg.view import plots, render, tables

EXPLAINER = ("The three lanes start together on the same prompt with the Generate tab's settings and seed, and count "
             "tokens the same way (pad is never output). Hybrid lets the sampler draft and AR verify, so its tokens "
             "are greedy AR's. TPF = tokens / (steps + K − 1) for diffusion (report §3.4; transformers omits the "
             "K − 1), tokens / NFE for hybrid; tok/s = generated tokens / wall time; TTFT = time to the first "
             "committed token. All three share one device.")
HYBRID = "Hybrid: the sampler drafts, AR verifies"


def _lane(name: str, title: str) -> tuple:
    """One lane's heading, its ✓/✗, canvas, stats table and text."""
    gr.Markdown(f"### {title}")
    mark = gr.Markdown(elem_id=f"dg-race-mark-{name}", elem_classes="dg-race-mark")
    return mark, gr.HTML([], html_template=render.PARTS_TEMPLATE), gr.Markdown(), gr.HTML()


def build(runner, shared: RunState, generate: GenerateTab, ar_model=None) -> None:
    """Prompt row, the three lanes side by side, then the result line and the chart."""
    tok = runner.tokenizer
    reference = SkillExamples.load()
    example = reference.race_example()
    ar_name = f"AR: {ar_model.source} via generate()" if ar_model else "AR: same weights, one token per forward"
    hybrid_name = f"{HYBRID}, on the diffusion model's own weights (not {ar_model.source})" if ar_model else HYBRID
    gr.Markdown(EXPLAINER)
    with gr.Row():
        prompt = gr.Textbox(example.prompt, label="Prompt", scale=4)
        thinking = gr.Checkbox(example.thinking, label="Thinking", scale=1)
        slow = gr.Slider(1, MAX_SLOW_MOTION, value=1, step=1, label="Slow motion: × slower than it ran", scale=2,
                         elem_id="dg-race-pace", info="1 = as it ran; 20 turns a 2 s race into 40 s to narrate")
        go = gr.Button("Race", variant="primary", scale=1)
        stop = gr.Button("Stop", variant="stop", scale=1)
    status = gr.Markdown(elem_id="dg-race-status")
    with gr.Row():
        lane_views = []
        for name, title in zip(race.LANES, ("Diffusion: entropy-bound sampler", ar_name, hybrid_name)):
            with gr.Column(min_width=300):
                lane_views.append(_lane(name, title))
    marks = [views[0] for views in lane_views]
    result = gr.Markdown(elem_id="dg-race-result")
    chart = gr.Plot(label="Tokens vs wall time")

    def lanes(traces: dict, tokenizers: dict, checks: dict, motion: SlowMotion) -> dict:
        """Each lane as it stands (its ✓/✗ once it has finished) and the status line."""
        done = all(trace.done for trace in traces.values())
        shown = f" · slow motion, {motion.factor:g}× slower" if motion.slowed else ""
        race_s = max(trace.last_t() for trace in traces.values())
        views = {status: ("finished" if done else f"racing… {race_s:.2f} s into the race") + shown}
        for (mark, canvas, stats, text), (name, trace) in zip(lane_views, traces.items()):
            views |= {mark: tables.lane_mark(trace, checks.get(name)), canvas: render.canvas_parts(trace, tokenizers[name]),
                      stats: tables.side_table(trace), text: render.text_view_html(trace, tokenizers[name])}
        return views

    async def run_race(prompt, thinking, seed, *rest, request=None):
        *knobs, slow_motion, history = rest
        inputs, config, seed = prepare(runner, prompt, None, thinking, seed, knobs)
        with refused_input():
            motion = SlowMotion(slow_motion if slow_motion is not None else 1)
        # the last race's result and marks go before this one runs
        yield {chart: None, result: "", status: "racing…", **dict.fromkeys(marks, "")}
        contest = race.start_race(runner, prompt, inputs=inputs, thinking=bool(thinking), config=config, seed=seed,
                                  ar_model=ar_model)
        tokenizers = {"diffusion": tok, "AR": contest.ar_tokenizer, "hybrid": tok}
        checked = {}  # each lane's check, made once when it has finished

        def checks(traces: dict) -> dict:
            for name, trace in traces.items():
                if trace.done and name not in checked:
                    checked[name] = reference.check(prompt, None, trace, tokenizers[name])
            return checked

        def draw(*frames):
            traces = dict(zip(race.LANES, frames))
            return lanes(traces, tokenizers, checks(traces), motion)

        async for update in slowed_stream(shared, request, list(contest.lanes.values()), draw, motion):
            yield update
        d, a, h = (lane.snapshot() for lane in contest.lanes.values())
        traces = dict(zip(race.LANES, (d, a, h)))
        meta = run_meta(runner, prompt, None, thinking, seed)
        history = history.keep(prompt, d, " race", meta).keep(prompt, h, " race hybrid", meta)
        yield {**draw(d, a, h), chart: plots.race_chart(traces), shared.history: history,
               result: tables.verdict(traces, checks(traces)), generate.picker: picker(history, select=False)}

    run_race, race_inputs = named_inputs(run_race, {"prompt": prompt, "thinking": thinking, **generate.settings.named,
                                                    "slow_motion": slow, "runs": shared.history})
    go.click(run_race, race_inputs,
             [*(view for views in lane_views for view in views), status, chart, result, shared.history,
              generate.picker], api_name="race", show_progress="hidden")
    stop.click(shared.stop, None, status, queue=False, api_visibility="private")
