"""The Learn tab: the forward process on an answer, one sampler step stage by stage, one hybrid verify round
(dg.ui.learn_hybrid), exports, and what diffusion can do (dg.ui.learn_diffusion).

The forward process and the one-pass prediction come from `dg.noise`; the stages are pictures of a
real recorded step (`dg.view.walkthrough`) of the run picked in the Generate tab, at a step chosen here.

    python app.py   # then the Learn tab
"""

import gradio as gr
import torch

from dg.config import check_seed
from dg.noise import corrupt
from dg.prompts import encode_text
from dg.ui.common import RunState, refused_input, shows_run, step_index, unless_live
from dg.examples import ExampleRow, SkillExamples
from dg.ui import learn_diffusion, learn_hybrid
from dg.ui.generate_tab import GenerateTab
from dg.ui.files import scratch_dir
from dg.view import export, walkthrough

# used when the examples hold no story: a prompt and an answer of dg/tiny/skills.py's story skill
STORY = ExampleRow("Write a short story about a bear named Max who likes fish and the beach.", None, False, "story",
                   "Max the bear woke up hungry one morning. The bear walked to the beach and found some fish there. "
                   "Max ate the fish and was happy all day.")
NO_RUN = ("No run yet. Generate one in the **Generate** tab (an example is quickest): this walkthrough then "
          "explains one of its steps, stage by stage, with that run's real numbers.")
NO_STEPS = "The picked run is an AR run: one token per forward, no sampler step to explain. Pick another run."


def build(runner, shared: RunState, generate: GenerateTab) -> None:
    _forward_process(runner)
    _sampler_step(runner, shared, generate)
    learn_hybrid.build(runner, shared, generate)
    _exports(runner, shared, generate)
    learn_diffusion.build(runner, shared, generate.pace)  # report §9, §1, §6: self-correction, the latency dial, the roofline


def vaguer(prompt: str) -> str:
    """A prompt that leaves out its details (from its first " who " on): "Write a short story about a bear named
    Max." from the story example, whose full prompt the embedded model answers by heart at any noise level."""
    head, _, tail = prompt.partition(" who ")
    return head.rstrip(" ,.") + "." if tail else prompt


def _forward_process(runner) -> None:
    """Noise an answer at level t; ask the model for one prediction from that noisy canvas."""
    tok = runner.tokenizer
    gr.Markdown("### Forward process: noise an answer\nTraining corrupts each canvas token, independently with "
                "probability *t*, into a uniform random token: no mask token (report §3.1). The prompt below says "
                "less than the answer, so the model has to read the rest off the canvas: raise *t* and fewer tokens "
                "come back. (Given the story's full example prompt, the embedded model writes this answer from the "
                "prompt alone, whatever the noise.)")
    vocab, canvas_length = runner.model.config.text_config.vocab_size, runner.model.config.canvas_length

    def noised(sentence, t, seed) -> tuple[list, list, list]:
        with refused_input():  # typed control tokens stay text; a seed is checked as Generate checks it
            ids = encode_text(tok, sentence, "answer to noise")[:canvas_length]
            generator = torch.Generator().manual_seed(check_seed(0 if seed is None else seed))
        noisy, replaced = corrupt(torch.tensor([ids]), vocab, float(t), generator)
        return ids, noisy[0].tolist(), replaced[0].tolist()

    def noise(sentence, t, seed):
        clean, noisy, replaced = noised(sentence, t, seed)
        return walkthrough.token_row_html(tok, noisy, replaced, clean, "replaced")

    def ask(prompt, sentence, t, seed):
        clean, noisy, _ = noised(sentence, t, seed)  # the canvas drawn above: same seed, same noise
        with refused_input():
            out = runner.denoise(prompt, noisy)
        right = [a == c for a, c in zip(out["argmax"], clean)]
        return (f"<p>One decoder pass at τ = {out['temperature']:.2f}, no self-conditioning (as step 1): the argmax "
                f"recovers {sum(right)}/{len(clean)} tokens (green).</p>"
                + walkthrough.token_row_html(tok, out["argmax"], right, clean, "recovered"))

    with gr.Row():
        story = next((row for row in SkillExamples.load().rows if row.skill == "story"), STORY)
        prompt = gr.Textbox(vaguer(story.prompt), label="Prompt", info="the example's prompt, up to its first "
                            "\"who\": the answer's details are left to the canvas")
        sentence = gr.Textbox(story.answer, label="Answer to noise", info="the reference answer of the prompt")
    with gr.Row():
        t = gr.Slider(0, 1, value=0.5, step=0.01, label="t (noise level)", scale=3)
        seed = gr.Number(0, label="noise seed", scale=1)  # no rounding: check_seed refuses 1.5
        go = gr.Button("Ask the model for one denoising prediction", scale=2)
    noisy, prediction = gr.HTML(noise(story.answer, 0.5, 0)), gr.HTML()
    noise_io = dict(inputs=[sentence, t, seed], outputs=noisy)
    t.change(noise, api_name="noise", show_progress="hidden", **noise_io)
    sentence.submit(noise, api_visibility="private", **noise_io)
    seed.change(noise, api_visibility="private", **noise_io)
    go.click(ask, [prompt, sentence, t, seed], prediction, api_name="denoise")


def _sampler_step(runner, shared: RunState, generate: GenerateTab) -> None:
    """The six stages of a step of the run picked in the Generate tab, as pictures with that step's numbers.

    A newly picked run opens at an instructive step (some positions accepted, others renoised), not at
    its last step, where everything is kept; the slider moves to any other."""
    gr.Markdown("### One sampler step, stage by stage\nThe real numbers of a step of the run picked in the "
                "Generate tab (Algorithm 1: decode, temperature, entropy, sort + bound, accept, renoise).")
    with gr.Row():
        step = gr.Slider(1, 2, value=1, step=1, label="Run step to explain", scale=2)
        stage = gr.Radio(list(walkthrough.STAGES), value=walkthrough.STAGES[0], label="Stage", scale=3)
    title = gr.Markdown(NO_RUN, elem_id="dg-learn-title")
    body = gr.HTML()
    with gr.Accordion("All of this stage's numbers (JSON)", open=False):
        numbers = gr.JSON(label="numbers")

    def stage_view(trace, label, index, stage):
        s = {s["stage"]: s for s in walkthrough.walkthrough(trace, runner.tokenizer, index)}[stage]
        rec = trace.steps[index]
        head = (f"**{label}** · run step {index + 1} of {len(trace.steps)} (canvas {rec.canvas + 1}, step {rec.step}) · "
                f"**{s['title']}**")
        return head, s["html"], s["numbers"]

    @unless_live
    def pick(history, label, stage, shown):
        """A newly picked run: the slider over its steps, at the instructive one (no slider value read); the run
        already shown stays as it is (the page may say a pick again without one)."""
        if shows_run(shown, label):
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        kept = history.run(label)
        if kept is None or not kept.trace.steps:
            return gr.skip(), NO_RUN if kept is None else NO_STEPS, "", None
        index = walkthrough.instructive_step(kept.trace)
        n = len(kept.trace.steps)
        return (gr.Slider(minimum=1, maximum=max(n, 2), value=index + 1),
                *stage_view(kept.trace, kept.label, index, stage))

    def walk(history, label, step, stage):
        kept = history.run(label)
        if kept is None or not kept.trace.steps:
            return NO_RUN if kept is None else NO_STEPS, "", None
        index = step_index(kept.trace, step)
        return stage_view(kept.trace, kept.label, index, stage)

    generate.picks.follow(pick, [shared.history, generate.picker, stage, title], [step, title, body, numbers])
    walk_io = dict(inputs=[shared.history, generate.picker, step, stage], outputs=[title, body, numbers],
                   api_visibility="private", show_progress="hidden")
    step.input(walk, **walk_io)
    stage.change(walk, **walk_io)


# A newly picked run replaces what the last export click said (a "nothing to export" among them); while a run
# plays the picker holds no run and the message stays.
PICKED_JS = "(label, said) => label ? `The selected run: **${label}**.` : said"


def _exports(runner, shared: RunState, generate: GenerateTab) -> None:
    gr.Markdown("### Export the selected run\nEach file records the prompt, seed, model and every setting.")
    go = gr.Button("Export trace JSON, animated GIF and HTML replay")
    message = gr.Markdown(elem_id="dg-export-message")
    with gr.Row(elem_id="dg-exports"):
        files = [gr.File(label=name) for name in ("trace.json", "run.gif", "replay.html")]

    def export_run(history, label):
        kept = history.run(label)
        if kept is None:
            return "Nothing to export yet: generate a run in the Generate tab first.", None, None, None
        folder, trace, meta = scratch_dir(), kept.trace, kept.meta
        return (f"Exported **{kept.label}**.", str(export.trace_json(trace, folder / "trace.json", meta)),
                str(export.trace_gif(trace, runner.tokenizer, folder / "run.gif", meta=meta)),
                str(export.trace_html(trace, runner.tokenizer, folder / "replay.html", meta=meta)))

    go.click(export_run, [shared.history, generate.picker], [message, *files], api_name="export")
    # in the page, as the pick happens: a reply from the server could land after a later export's message
    generate.picker.change(None, [generate.picker, message], message, js=PICKED_JS, show_progress="hidden")
