"""The Generate tab's decoding mode: diffusion, hybrid or AR on the same weights, and each mode's plots.

The selector names the modes as a person reads them; `engine_mode` turns the chosen name into the mode a
live run streams (dg.engine.runs.LiveRun.of, down to dg.modes.stream_mode, the one branch on the mode).
Diffusion and hybrid are seeded (the sampler draws); AR is greedy and draws nothing. A hybrid run's fourth plot is its tokens per
verify round instead of the canvas timeline (hybrid commits token by token, not canvas by canvas).

    python app.py   # then the Generate tab: Mode
"""

import gradio as gr

from dg.ui.common import refusal

CHOICES = {"diffusion": "diffusion", "hybrid": "hybrid", "AR": "ar"}  # shown name → dg.engine.runner mode
HELP = ("diffusion: the entropy-bound sampler, a canvas at a time · hybrid: the sampler drafts, AR verifies "
        "(greedy AR's tokens, each round coloured) · AR: one token per forward, same weights")
FOURTH_PLOT = "Canvas timeline (a hybrid run: tokens per verify round)"


def selector() -> gr.Radio:
    return gr.Radio(list(CHOICES), value="diffusion", label="Mode", info=HELP, elem_id="dg-mode")


def engine_mode(shown: str) -> str:
    """The mode (dg.config.MODES) of the name `shown` on the selector; another name is a one-line refusal."""
    if shown not in CHOICES:
        raise refusal(f"mode must be one of {', '.join(CHOICES)}, got {shown!r}")
    return CHOICES[shown]
