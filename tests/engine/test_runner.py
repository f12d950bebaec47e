"""The runner protocol in this process: every mode's records are its core generator's, an unknown mode is one
line naming the modes, and Learn's pass and the description are the model's own."""

import threading

import pytest
import torch

from dg.ar import generate_ar
from dg.config import MODES, SamplerConfig
from dg.edits import CanvasEdit
from dg.engine.runner import InProcess
from dg.denoise import denoise_once
from dg.sampler import generate_diffusion
from tests.engine.conftest import PROMPT


def test_a_diffusion_run_streams_the_records_of_the_sampler_after_the_same_seed(loaded, config, inputs):
    torch.manual_seed(3)
    solo = generate_diffusion(loaded.model, inputs, config)
    torch.manual_seed(3)
    records = list(loaded.stream("diffusion", inputs, config, 3, threading.Event()))
    steps = [r for r in records if r.kind == "step"]
    assert records[0].kind == "start" and records[-1].kind == "end"
    assert [r.argmax.tolist() for r in steps] == [r.argmax.tolist() for r in solo.steps]


def test_an_ar_run_decodes_greedily_up_to_the_settings_token_budget(loaded, config, inputs):
    settings = config.replace(max_new_tokens=12)
    solo = generate_ar(loaded.model, inputs, SamplerConfig(max_new_tokens=12))
    tokens = [r.token_id for r in loaded.stream("ar", inputs, settings, None, threading.Event()) if r.kind == "token"]
    assert tokens == [r.token_id for r in solo.tokens] and len(tokens) <= 12


def test_a_hybrid_run_streams_greedy_ar_s_tokens_with_its_rounds(loaded, config, inputs):
    solo = generate_ar(loaded.model, inputs, config)
    records = list(loaded.stream("hybrid", inputs, config, 3, threading.Event()))
    assert [r.token_id for r in records if r.kind == "token"] == solo.token_ids
    assert any(r.kind == "round" for r in records) and records[-1].kind == "end"


def draft_of(loaded, config, inputs, seed=3):
    """A finished run's canvases with their second quarter blanked (dg.edits), as the app's Re-denoise sends them."""
    torch.manual_seed(seed)
    edit = CanvasEdit.of_trace(generate_diffusion(loaded.model, inputs, config))
    edit = edit.blanked(range(len(edit) // 4, len(edit) // 2))
    return edit.to_draft(loaded.model.config.text_config.vocab_size, torch.Generator().manual_seed(seed))


def test_a_draft_warm_starts_a_diffusion_run_with_its_pins_held_as_the_sampler_does(loaded, config, inputs):
    draft = draft_of(loaded, config, inputs)
    torch.manual_seed(3)
    solo = generate_diffusion(loaded.model, inputs, config, draft=draft)
    torch.manual_seed(3)
    records = list(loaded.stream("diffusion", inputs, config, 3, threading.Event(), draft))
    steps = [r for r in records if r.kind == "step"]
    assert steps and [r.argmax.tolist() for r in steps] == [r.argmax.tolist() for r in solo.steps]
    assert all(r.pinned is not None for r in steps)


def test_a_draft_for_ar_or_hybrid_is_one_line_that_says_it_seeds_diffusion(loaded, config, inputs):
    draft = draft_of(loaded, config, inputs)
    for mode in ("ar", "hybrid"):
        with pytest.raises(ValueError, match="a draft seeds the diffusion canvas"):
            loaded.stream(mode, inputs, config, None, threading.Event(), draft)


def test_a_set_cancel_event_ends_the_run_cancelled_before_its_first_step(loaded, config, inputs):
    cancel = threading.Event()
    cancel.set()
    for mode in MODES:
        records = list(loaded.stream(mode, inputs, config, None, cancel))
        assert records[-1].kind == "end" and records[-1].finish_reason == "cancelled", mode


def test_an_unknown_mode_is_one_line_that_names_the_modes(loaded, config, inputs):
    with pytest.raises(ValueError, match=r"^mode must be one of diffusion, ar, hybrid, got 'beam'$"):
        loaded.stream("beam", inputs, config, None, threading.Event())


def test_the_in_process_runner_is_the_loaded_model_with_its_pass_and_description(loaded):
    runner = InProcess.of(loaded)
    assert runner.model is loaded.model and runner.sampler_config == loaded.sampler_config
    assert runner.describe() == loaded.describe()
    canvas = [5, 9, 200, 3, 77]
    assert runner.denoise(PROMPT, canvas) == denoise_once(loaded.model, loaded.processor, PROMPT, canvas)
    runner.yield_cpu()
    runner.close()  # nothing to free: the model stays usable
    assert runner.model is loaded.model
