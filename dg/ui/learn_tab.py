"""The Learn tab: the forward process on an answer, one sampler step stage by stage, and exports.

The forward process and the one-pass prediction come from `dg.noise`; the stages are those of a real
recorded step (`dg.view.walkthrough`) of the run and step picked in the Generate tab's replay.

    python app.py   # then the Learn tab
"""

import gradio as gr
import torch

from dg.config import check_seed
from dg.noise import corrupt, denoise_once
from dg.prompts import encode_text
from dg.ui.common import Shared, load_examples, refused_input
from dg.ui.generate_tab import GenerateTab
from dg.ui.session import scratch_dir
from dg.view import export, walkthrough

# a story from dg/tiny/skills.py, answered as the embedded model was taught to
STORY_ANSWER = "Alice the bear loves to eat honey every day."


def build(loaded, shared: Shared, generate: GenerateTab) -> None:
    _forward_process(loaded)
    _sampler_step(loaded, shared, generate)
    _exports(loaded, shared, generate)


def _forward_process(loaded) -> None:
    """Noise an answer at level t; ask the model for one prediction from that noisy canvas."""
    tok = loaded.tokenizer
    gr.Markdown("### Forward process: noise an answer\nTraining corrupts each canvas token, independently with "
                "probability *t*, into a uniform random token: no mask token (report §3.1).")
    vocab, canvas_length = loaded.model.config.text_config.vocab_size, loaded.model.config.canvas_length

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
        try:
            out = denoise_once(loaded.model, loaded.processor, prompt, noisy)
        except ValueError as err:
            raise gr.Error(str(err)) from None
        right = [a == c for a, c in zip(out["argmax"], clean)]
        return (f"<p>One decoder pass at τ = {out['temperature']:.2f}, no self-conditioning (as step 1): the argmax "
                f"recovers {sum(right)}/{len(clean)} tokens (green).</p>"
                + walkthrough.token_row_html(tok, out["argmax"], right, clean, "recovered"))

    with gr.Row():
        prompt = gr.Textbox(load_examples()["tiny"][-1][0], label="Prompt")
        sentence = gr.Textbox(STORY_ANSWER, label="Answer to noise")
    with gr.Row():
        t = gr.Slider(0, 1, value=0.5, step=0.01, label="t (noise level)", scale=3)
        seed = gr.Number(0, label="noise seed", precision=0, scale=1)
        go = gr.Button("Ask the model for one denoising prediction", scale=2)
    noisy, prediction = gr.HTML(noise(STORY_ANSWER, 0.5, 0)), gr.HTML()
    noise_io = dict(inputs=[sentence, t, seed], outputs=noisy)
    t.change(noise, api_name="noise", show_progress="hidden", **noise_io)
    sentence.submit(noise, api_visibility="private", **noise_io)
    seed.change(noise, api_visibility="private", **noise_io)
    go.click(ask, [prompt, sentence, t, seed], prediction, api_name="denoise")


def _sampler_step(loaded, shared: Shared, generate: GenerateTab) -> None:
    """The six stages of the step picked in the Generate tab's replay, with that step's numbers."""
    gr.Markdown("### One sampler step, stage by stage\nThe real numbers of the run and step picked in the Generate "
                "tab's replay (Algorithm 1: decode, temperature, entropy, sort + bound, accept, renoise).")
    stage = gr.Radio(list(walkthrough.STAGES), value=walkthrough.STAGES[0], label="Stage")
    title, body, numbers = gr.Markdown(), gr.HTML(max_height=420), gr.JSON(label="numbers")

    def walk(history, label, step, stage):
        trace = history.find(label)
        if trace is None or not trace.steps:
            return "Generate a run first: the walkthrough explains one of its steps.", "", None
        step = min(max(int(step or 0), 0), len(trace.steps) - 1)
        s = {s["stage"]: s for s in walkthrough.walkthrough(trace, loaded.tokenizer, step)}[stage]
        rec = trace.steps[step]
        return f"**{label}** · canvas {rec.canvas + 1}, step {rec.step} · **{s['title']}**", s["html"], s["numbers"]

    for event in (stage.change, generate.step.change, shared.history.change):
        event(walk, [shared.history, generate.picker, generate.step, stage], [title, body, numbers],
              api_visibility="private", show_progress="hidden")


def _exports(loaded, shared: Shared, generate: GenerateTab) -> None:
    gr.Markdown("### Export the selected run")
    go = gr.Button("Export trace JSON, animated GIF and HTML replay")
    with gr.Row():
        files = [gr.File(label=name) for name in ("trace.json", "run.gif", "replay.html")]

    def export_run(history, label):
        trace = history.find(label)
        if trace is None:
            raise gr.Error("Nothing to export yet: generate a run first.")
        folder = scratch_dir()
        return (str(export.trace_json(trace, folder / "trace.json")),
                str(export.trace_gif(trace, loaded.tokenizer, folder / "run.gif")),
                str(export.trace_html(trace, loaded.tokenizer, folder / "replay.html")))

    go.click(export_run, [shared.history, generate.picker], files, api_name="export")
