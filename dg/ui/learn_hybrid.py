"""Learn's hybrid section: one verify round of a real recorded hybrid run, in four pictures.

The draft (the sampler's argmax with the verified tokens pinned) → greedy AR's argmax under it (one
causal encoder pass over the draft) → the accepted prefix → AR's own token at the first disagreement
(dg.view.hybrid.verify_round). The round comes from the run picked in the Generate tab when it is a
hybrid run; the button runs the race's three-term sum in hybrid mode (dg.engine, in turns with every
other run), shows each round as it is verified at the Generate tab's Pace (a round per draft's steps), then
keeps the run in the session's history and picks it.

    python app.py   # then the Learn tab: one verify round
"""

from collections import namedtuple

import gradio as gr

from dg.engine.runs import LiveRun, prepare_run
from dg.examples import SkillExamples
from dg.ui.common import paced_stream, picker, refusal, refused_input, shows_run, unless_live
from dg.ui.generate_tab import GenerateTab, run_meta
from dg.view import hybrid, render

INTRO = ("### Hybrid decoding: one verify round\nThe sampler drafts the canvas with every verified token pinned; "
         "one causal encoder pass over the draft is AR itself (at each position, greedy AR's next token given the "
         "draft before it). The round keeps the longest run of draft tokens equal to AR's and adds AR's own token at "
         "the first disagreement, so the output is greedy AR's, token for token.")
Live = namedtuple("Live", "trace label")  # a run still playing, shown as a kept run is
NOT_HYBRID = ("The run picked in the Generate tab is no hybrid run. Run the example below, or pick a hybrid run "
              "(Generate with Mode: hybrid, or a race's hybrid lane).")


def build(runner, shared, generate: GenerateTab) -> None:
    example = SkillExamples.load().race_example()
    gr.Markdown(INTRO, elem_id="dg-learn-hybrid")
    with gr.Row():
        go = gr.Button(f"Run hybrid on “{example.prompt}”" + (" with thinking" if example.thinking else ""),
                       scale=2, elem_id="dg-hybrid-go")
        round_slider = gr.Slider(1, 2, value=1, step=1, label="Verify round", scale=3)
    title = gr.Markdown(NOT_HYBRID, elem_id="dg-hybrid-title")
    body = gr.HTML()
    with gr.Accordion("This round's numbers (JSON)", open=False):
        numbers = gr.JSON(label="numbers")

    def view(kept, j, live: bool = False):
        stages = hybrid.verify_round(kept.trace, runner.tokenizer, j)
        html = "".join(f'<div class="dg-view"><div class="dg-title">{n + 1}. {s["title"]}</div></div>{s["html"]}'
                       for n, s in enumerate(stages))
        rnd = kept.trace.rounds[j]
        of = ", live" if live else f" of {len(kept.trace.rounds)}"  # a run still playing has no total yet
        head = (f"**{kept.label}** · verify round {j + 1}{of} (canvas {rnd.canvas + 1}): "
                f"{hybrid.round_summary(kept.trace, j)}")
        return head, html, stages[0]["numbers"]

    def live(frame, index, pace) -> dict:
        """The run as it plays: its latest round verified by the step the pace shows."""
        shown = render.trace_until(frame, pace.index(len(frame.steps)) if index is None else index)
        if not shown.rounds:
            return {title: f"**{example.prompt}** · drafting the first round…"}
        return dict(zip((title, body, numbers), view(Live(shown, example.prompt), len(shown.rounds) - 1, live=True)))

    @unless_live
    def pick(history, label, shown):
        """A newly picked run: its instructive round, the slider over its rounds; the run already shown stays as it
        is (the page may say a pick again without one)."""
        if shows_run(shown, label):
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        kept = history.run(label)
        if kept is None or kept.trace.mode != "hybrid" or not kept.trace.rounds:
            return gr.skip(), NOT_HYBRID, "", None
        j, n = hybrid.instructive_round(kept.trace), len(kept.trace.rounds)
        return gr.Slider(minimum=1, maximum=max(n, 2), value=j + 1), *view(kept, j)

    def walk(history, label, r):
        kept = history.run(label)
        if kept is None or kept.trace.mode != "hybrid" or not kept.trace.rounds:
            return NOT_HYBRID, "", None
        return view(kept, min(max(int(r or 1), 1), len(kept.trace.rounds)) - 1)

    async def run_example(history, pace_ms=0, request: gr.Request = None):
        with refused_input():
            inputs, config, seed = prepare_run(runner, example.prompt, None, example.thinking, 0, {})
        run = LiveRun.of(runner, "hybrid", inputs, config, seed, label="hybrid").start()
        async for update in paced_stream(shared, request, run, live, pace_ms):
            yield update
        if run.error:
            raise refusal(run.error)
        history = history.keep(example.prompt, run.snapshot(), " hybrid",
                               run_meta(runner, example.prompt, None, example.thinking, seed))
        yield {shared.history: history, generate.picker: picker(history)}

    go.click(run_example, [shared.history, generate.pace], [shared.history, generate.picker, title, body, numbers],
             api_name="hybrid_round", show_progress="hidden")
    generate.picks.follow(pick, [shared.history, generate.picker, title], [round_slider, title, body, numbers])
    round_slider.input(walk, [shared.history, generate.picker, round_slider], [title, body, numbers],
                       api_visibility="private", show_progress="hidden")

