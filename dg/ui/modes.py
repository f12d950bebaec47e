"""The Generate tab's decoding mode: diffusion, hybrid or AR on the same weights, and each mode's plots.

The selector names the modes as a person reads them; a run of the chosen mode comes from the engine's one
mode branch (dg.engine.runner.stream_mode, through dg.engine.runs.mode_run). Diffusion and hybrid are
seeded (the sampler draws); AR is greedy and draws nothing. A hybrid run's fourth plot is its tokens per
verify round instead of the canvas timeline (hybrid commits token by token, not canvas by canvas).

    python app.py   # then the Generate tab: Mode
"""

import gradio as gr

from dg.engine.runs import LiveRun, mode_run
from dg.ui.common import refusal
from dg.view import plots

CHOICES = {"diffusion": "diffusion", "hybrid": "hybrid", "AR": "ar"}  # shown name → dg.engine.runner mode
HELP = ("diffusion: the entropy-bound sampler, a canvas at a time · hybrid: the sampler drafts, AR verifies "
        "(greedy AR's tokens, each round coloured) · AR: one token per forward, same weights")
FOURTH_PLOT = "Canvas timeline (a hybrid run: tokens per verify round)"


def selector() -> gr.Radio:
    return gr.Radio(list(CHOICES), value="diffusion", label="Mode", info=HELP, elem_id="dg-mode")


def start(loaded, shown: str, inputs: dict, config, seed: int) -> LiveRun:
    """A started run of the mode named `shown` (AR unseeded: greedy draws no random numbers)."""
    if shown not in CHOICES:
        raise refusal(f"mode must be one of {', '.join(CHOICES)}, got {shown!r}")
    mode = CHOICES[shown]
    return mode_run(loaded, mode, inputs, config, None if mode == "ar" else seed).start()


def figures(trace, tokenizer) -> tuple:
    """The four plots of a run (dg.view.plots.run_figures: the last one by mode)."""
    return tuple(plots.run_figures(trace, tokenizer))
