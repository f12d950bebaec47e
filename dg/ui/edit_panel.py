"""Edit the canvas and re-denoise: the Generate tab's infill panel.

The run shown in the run picker loads here (a diffusion run's committed canvases, every cell pinned). A click
on a cell pins or frees it, blanks it, or picks it for writing, as the "a click" choice says; a shift-click
does the same to every cell since the last click. **Re-denoise** runs the sampler again on the run's prompt,
seed and settings, warm-started from the edited canvas with the pinned cells held (dg.edits → a
dg.drafts.Draft → the runner, in this process or the worker), as a new run in the session's history: the
replay, inspector, plots and run picker reach it like any other, and a table sets it beside the run it came
from; it plays at the Generate tab's Pace (dg.ui.common.paced_stream), as Generate's own runs do. A draft with
blanks (dg.drafts' `{{n}}` / `{{...}}`) on the Generate tab's prompt is a second way in.

    python app.py   # Generate → "Edit the canvas and re-denoise"
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
import html

import gradio as gr

from dg.drafts import blank_generator, draft_for
from dg.edits import CanvasEdit
from dg.engine.runs import LiveRun, prepare_run
from dg.ui.kept import KeptRun
from dg.examples import load_rows
from dg.ui.common import (KNOB_NAMES, Picks, RunState, named_inputs, paced_stream, picker, refused_input, refusal,
                          unless_live)
from dg.view.edit import edit_parts
from dg.view.render import PARTS_TEMPLATE
from dg.view.tables import compare_table, summary

PIN, BLANK, WRITE = "pins / frees it", "blanks it", "picks it for writing"
CLICKS = (PIN, BLANK, WRITE)
INFILL_GROUP = "infill"  # examples.json's drafts with blanks for the embedded model
# A click on a cell writes "pos" (a shift-click "last-pos") and a fresh stamp into the hidden box, so the same
# cell clicked twice is still a change; the panel's handler reads it.
CLICK_JS = """let last = null;
element.addEventListener('mousedown', (e) => { if (e.shiftKey) e.preventDefault(); });  // no text selection
element.addEventListener('click', (e) => {
  const cell = e.target.closest('[data-pos]');
  const box = document.querySelector('#dg-edit-click textarea, #dg-edit-click input');
  if (!cell || !box) return;
  const pos = cell.dataset.pos;
  const cells = (e.shiftKey && last !== null) ? `${last}-${pos}` : pos;
  last = pos;
  box.value = `${cells}@${Date.now()}`;
  box.dispatchEvent(new Event('input', {bubbles: true}));
});"""


@dataclass(frozen=True)
class Editing:
    """The canvas being edited, the run it came from, that run's picture as uploaded, the cell text goes to."""

    edit: CanvasEdit
    source: KeptRun
    image: str | None
    selected: int | None = None


@dataclass
class Panel:
    canvas: gr.HTML
    click: gr.Textbox
    mode: gr.Radio
    text: gr.Textbox
    write: gr.Button
    reset: gr.Button
    go: gr.Button
    compare: gr.Markdown
    draft: gr.Textbox
    run_draft: gr.Button
    state: gr.State


@dataclass
class Hooks:
    """What the panel borrows from the Generate tab: its inputs, and how it draws a run live and finished."""

    inputs: dict  # prompt, image, thinking, seed, then every knob, by API name (Generate's `Inputs.run`)
    image: gr.File
    picks: Picks  # the run picker and the views that follow it
    status: gr.Markdown
    outputs: list  # every view `finished` fills
    pace: gr.Slider  # Generate's Pace: re-denoised and draft runs play at it too
    live: Callable  # (run, the session's History) → draw(live frame, step to show or None, Pace) → {component: value}
    finished: Callable  # a KeptRun → {component: value} for each of `outputs`
    meta: Callable  # (prompt, image, thinking, seed) → what produced a run, for its exports
    plots: dict  # the chained event that draws the plots of the picked run


def panel(runner, prompt: gr.Textbox, thinking: gr.Checkbox) -> Panel:
    """The panel's components, in the column it is built in."""
    with gr.Accordion("Edit the canvas and re-denoise (infill)", open=True, elem_id="dg-edit"):
        canvas = gr.HTML(edit_parts(None, runner.tokenizer), html_template=PARTS_TEMPLATE, elem_id="dg-edit-canvas",
                         js_on_load=CLICK_JS)
        click = gr.Textbox(visible="hidden", elem_id="dg-edit-click")
        mode = gr.Radio(list(CLICKS), value=PIN, label="A click on a cell…", elem_id="dg-edit-mode",
                        info="shift-click: the same for every cell since the last click")
        with gr.Row():
            text = gr.Textbox(label="Text to write at the picked cell (pinned)", placeholder="␣Paris", scale=3,
                              elem_id="dg-edit-text")
            write = gr.Button("Write", scale=1)
        with gr.Row():
            reset = gr.Button("Reset the edits")
            go = gr.Button("Re-denoise", variant="primary", elem_id="dg-redenoise")
        compare = gr.Markdown(elem_id="dg-edit-compare")
        with gr.Accordion("Or a draft with blanks, on the prompt above", open=False):
            draft = gr.Textbox(label="Draft of the reply", lines=2, elem_id="dg-draft",
                               info="{{n}}: n free tokens; a final {{...}}: the rest of the budget; the text is "
                                    "pinned. Without blanks the draft is a warm start.")
            run_draft = gr.Button("Run the draft", elem_id="dg-run-draft")
            rows = load_rows().get(INFILL_GROUP, ())
            if rows:
                gr.Examples([[r.prompt, r.thinking, r.draft] for r in rows], [prompt, thinking, draft],
                            label="Bidirectional infill on the embedded model (checked against the prompt's own "
                                  "answer: a pinned value the prompt does not say differs from it)")
    return Panel(canvas, click, mode, text, write, reset, go, compare, draft, run_draft, gr.State(None))


def _view(editing: Editing | None, tokenizer, note: str = "") -> list[str]:
    if editing is None:
        return edit_parts(None, tokenizer, note=note)
    return edit_parts(editing.edit, tokenizer, selected=editing.selected, title=f"editing {editing.source.label}")


def load(history, label, image) -> tuple[Editing | None, str]:
    """The picked run as an edit (all pinned), or None and why it cannot be edited."""
    kept = history.run(label)
    if kept is None:
        return None, ""
    try:
        edit = CanvasEdit.of_trace(kept.trace)
    except ValueError as err:
        return None, f"{kept.label}: {err}"
    name = kept.meta.get("image")
    same = image if name and image and str(image).replace("\\", "/").rsplit("/", 1)[-1] == name else None
    return Editing(edit, kept, same), ""


def clicked(editing: Editing | None, cells: str, mode: str) -> Editing | None:
    """A click ("pos@stamp") or shift-click ("last-pos@stamp") applied as `mode` says."""
    if editing is None or not cells:
        return editing
    spec = cells.split("@", 1)[0]
    last, _, pos = spec.rpartition("-")
    edit, here = editing.edit, edit_span(editing.edit, spec)
    if mode == BLANK:
        return replace(editing, edit=edit.blanked(here))
    if mode == WRITE:
        return replace(editing, selected=int(pos))
    if last:  # a shift-click: every cell since the last click takes the state that click gave
        return replace(editing, edit=edit.with_pins(here, edit.pinned[int(last)]))
    return replace(editing, edit=edit.toggled(int(pos)))


def edit_span(edit: CanvasEdit, spec: str) -> range:
    with refused_input():
        return edit.span(spec)


def check_redenoise(editing: Editing | None) -> None:
    """Re-denoise's refusals: no run picked, nothing free or blank to denoise, or its picture gone."""
    if editing is None:
        raise refusal("nothing to re-denoise: generate a diffusion run first, its canvas loads here")
    if editing.edit.counts["pinned"] == len(editing.edit):
        raise refusal(f"every cell is pinned, so there is nothing to re-denoise: with “a click” set to “{PIN}” "
                      f"or “{BLANK}”, free or blank some cells first")
    image = editing.source.meta.get("image")
    if image and editing.image is None:
        raise refusal(f"this run's picture {image!r} is no longer uploaded: upload it in Generate, then "
                      "pick the run again")


def wire(runner, shared: RunState, p: Panel, hooks: Hooks) -> None:
    tok = runner.tokenizer

    @unless_live  # the panel keeps the run it edits while the re-denoised run plays
    def on_pick(history, label, image, editing, shown):
        if editing is not None and editing.source.label == label:  # said again without a pick: the edits stay
            return gr.skip(), gr.skip()
        was, (editing, note) = editing, load(history, label, image)
        if was is None and editing is None and html.escape(note) in "".join(shown or ()):  # the same note again
            return gr.skip(), gr.skip()
        return editing, _view(editing, tok, note)

    def on_click(editing, cells, mode):
        editing = clicked(editing, cells, mode)
        return editing, _view(editing, tok)

    def on_write(editing, text):
        if editing is None or editing.selected is None:
            raise refusal("pick a cell to write at: choose “picks it for writing”, then click a cell")
        with refused_input():
            editing = replace(editing, edit=editing.edit.written(tok, editing.selected, text))
        return editing, _view(editing, tok)

    def on_reset(editing):
        if editing is None:
            return None, _view(None, tok)
        editing = replace(editing, edit=CanvasEdit.of_trace(editing.source.trace), selected=None)
        return editing, _view(editing, tok)

    edit_io = [p.state, p.canvas]
    hooks.picks.follow(on_pick, [shared.history, hooks.picks.picker, hooks.image, p.state, p.canvas], edit_io)
    p.click.change(on_click, [p.state, p.click, p.mode], edit_io, api_visibility="private", show_progress="hidden")
    p.write.click(on_write, [p.state, p.text], edit_io, api_visibility="private")
    p.text.submit(on_write, [p.state, p.text], edit_io, api_visibility="private")
    p.reset.click(on_reset, p.state, edit_io, api_visibility="private")
    _wire_runs(runner, shared, p, hooks)


def _wire_runs(runner, shared: RunState, p: Panel, hooks: Hooks) -> None:
    """Re-denoise and Run the draft: a diffusion run with a draft, streamed into Generate's views, kept."""
    tok, vocab = runner.tokenizer, runner.model.config.text_config.vocab_size

    async def run(prompt, image, thinking, seed, knobs: dict, draft_of: Callable, history, pace_ms, request,
                  source=None, made_from: dict | None = None):
        with refused_input():
            run_inputs, config, seed = prepare_run(runner, prompt, image, thinking, seed, knobs)
            draft = draft_of(config, seed)
        live = LiveRun.of(runner, "diffusion", run_inputs, config, seed, draft=draft).start()
        async for update in paced_stream(shared, request, live, hooks.live(live, history), pace_ms):
            yield update
        trace = live.snapshot()
        tag = " ✎" if source is not None else " draft"
        meta = {**hooks.meta(prompt, image, thinking, seed), **(made_from or {})}
        history = history.keep(prompt, trace, tag, meta=meta)
        kept = history.run(None)
        table = compare_table({source.label: source.trace, kept.label: trace}) if source is not None else ""
        yield {**hooks.finished(kept), shared.history: history, hooks.picks.picker: picker(history),
               hooks.status: summary(trace), p.compare: table}

    async def redenoise(editing, history, pace_ms=0, request: gr.Request = None):
        check_redenoise(editing)
        meta, kept = editing.source.meta, editing.source
        knobs = {k: v for k, v in kept.trace.start.config.items() if k in KNOB_NAMES}
        async for update in run(meta["prompt"], editing.image, meta.get("thinking", False), meta.get("seed", 0),
                                knobs, lambda config, seed: editing.edit.to_draft(vocab, blank_generator(seed)), history, pace_ms, request,
                                kept, {"edited_from": kept.label, **editing.edit.counts}):
            yield update

    async def from_draft(prompt, image, thinking, seed, *rest, request=None):
        *knob_values, text, history, pace_ms = rest

        def draft_of(config, seed):
            return draft_for(runner.model, tok, text, config.max_new_tokens, seed)

        async for update in run(prompt, image, thinking, seed, dict(zip(KNOB_NAMES, knob_values)), draft_of, history,
                                pace_ms, request, made_from={"draft": text}):
            yield update

    outputs = [*hooks.outputs, shared.history, hooks.picks.picker, hooks.status, p.compare]
    p.go.click(redenoise, [p.state, shared.history, hooks.pace], outputs, api_name="redenoise",
               show_progress="hidden") \
        .then(api_visibility="private", **hooks.plots)
    from_draft, draft_inputs = named_inputs(from_draft, {**hooks.inputs, "draft": p.draft, "runs": shared.history,
                                                         "pace_ms": hooks.pace})
    p.run_draft.click(from_draft, draft_inputs, outputs, api_name="draft",
                      show_progress="hidden").then(api_visibility="private", **hooks.plots)
