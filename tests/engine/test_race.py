"""Races: the three lanes (diffusion, AR, hybrid) start together and stream live; each lane records what a
headless run of it records and counts tokens the same way; a separate AR model races through transformers'
generate() with a recording streamer while hybrid stays on the diffusion model's weights; each lane's table."""

import math

import numpy as np
import pytest
import torch

from dg.ar import generate_ar
from dg.hybrid import generate_hybrid
from dg.passes import TOPK
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.trace import Trace
from dg.engine import race
from dg.engine.runs import LiveRun
from dg.engine.turns import Turns
from dg.loading import load_ar_model
from dg.view import tables
from tests.engine.conftest import PROMPT


def finish(contest):
    """The race's final (diffusion, AR, hybrid) traces."""
    for frame in contest.frames(fps=100):
        pass
    return frame


def test_a_race_streams_three_lanes_and_each_records_its_forward_passes(loaded, config):
    contest = race.start_race(loaded, PROMPT, config=config, seed=0)
    d, a, h = finish(contest)
    assert list(contest.lanes) == ["diffusion", "AR", "hybrid"]
    assert all(t.done for t in (d, a, h)) and (d.mode, a.mode, h.mode) == ("diffusion", "ar", "hybrid")
    assert "verify rounds" in tables.side_stats(h) and h.rounds
    for trace in (d, a, h):
        stats = tables.side_stats(trace)
        assert stats["forward passes"] > 0 and stats["finish"] in ("eos", "max_new_tokens")
        assert f"| forward passes | {stats['forward passes']} |" in tables.side_table(trace)
    assert tables.speedup(d, a) == pytest.approx(d.metrics()["effective_tok_s"] / a.metrics()["effective_tok_s"])


def test_each_lane_of_a_race_records_what_its_headless_run_records(loaded, config):
    d, a, h = finish(race.start_race(loaded, PROMPT, config=config, seed=4))
    inputs = build_inputs(loaded.processor, PROMPT)
    torch.manual_seed(4)
    assert d.token_ids == generate_diffusion(loaded.model, inputs, config).token_ids
    greedy = generate_ar(loaded.model, inputs, config)
    assert a.token_ids == greedy.token_ids
    torch.manual_seed(4)
    assert h.token_ids == generate_hybrid(loaded.model, inputs, config).token_ids == greedy.token_ids


def test_stopping_a_race_stops_every_lane_and_keeps_the_partial_traces(loaded):
    slow = loaded.sampler_config.replace(max_denoising_steps=128, max_new_tokens=1024, backend="torch")
    contest = race.start_race(loaded, PROMPT, config=slow, seed=0)
    for d, a, h in contest.frames(fps=100):
        if d.steps and a.tokens and h.tokens:
            contest.stop()
    assert d.end.finish_reason == "cancelled"
    assert a.end.finish_reason in ("cancelled", "eos") and h.end.finish_reason in ("cancelled", "eos")
    assert d.steps and a.tokens and h.tokens


def test_the_streamer_skips_the_prompt_and_stamps_every_token_in_order():
    records = []
    streamer = race.TraceStreamer(records.append, clock=0.0)
    streamer.put(torch.tensor([[5, 6, 7]]))  # the prompt
    streamer.put(torch.tensor([9]))
    streamer.put(torch.tensor([3]))
    streamer.end()
    assert [(r.index, r.token_id) for r in records] == [(0, 9), (1, 3)]
    assert records[0].t <= records[1].t and math.isnan(records[0].entropy)
    assert streamer.count == 2 and streamer.last_token == 3


def test_a_separate_ar_model_races_through_generate_and_hybrid_stays_on_the_diffusion_weights(loaded, config,
                                                                                            ar_model_dir):
    ar_model = load_ar_model(str(ar_model_dir))
    contest = race.start_race(loaded, PROMPT, config=config, seed=0, ar_model=ar_model)
    d, a, h = finish(contest)
    own = generate_ar(loaded.model, build_inputs(loaded.processor, PROMPT), config)
    assert h.token_ids == own.token_ids and "diffusion model's own weights" in contest.hybrid_label
    assert contest.ar_tokenizer is ar_model.tokenizer and a.start.config["model"] == str(ar_model_dir)
    inputs = ar_model.inputs(PROMPT)
    with torch.no_grad():
        reference = ar_model.model.generate(**inputs, max_new_tokens=config.max_new_tokens, do_sample=False,
                                            pad_token_id=ar_model.eos_token_ids[0])
    assert a.token_ids == reference[0, inputs["input_ids"].shape[1]:].tolist()
    times = [r.t for r in a.tokens]
    assert times == sorted(times) and a.end.encoder_forwards == len(a.tokens)
    assert all(np.isfinite(r.entropy) and len(r.topk_ids) == TOPK for r in a.tokens)
    assert tables.side_stats(a)["forward passes"] == len(a.tokens) and d.done


def test_a_separate_ar_model_gets_the_chat_turn_the_diffusion_model_gets_through_its_own_template(loaded,
                                                                                                  ar_model_dir):
    ar_model = load_ar_model(str(ar_model_dir))  # its tokenizer carries the tiny model's chat template
    for thinking in (False, True):
        ours = build_inputs(loaded.processor, PROMPT, thinking=thinking)
        theirs = ar_model.inputs(PROMPT, thinking)
        assert theirs["input_ids"].tolist() == ours["input_ids"].tolist()
        assert set(theirs) == {"input_ids", "attention_mask"}  # a bare tokenizer: text only


def test_every_lane_counts_tokens_the_same_way_pad_is_never_output(loaded, config):
    d, a, h = finish(race.start_race(loaded, PROMPT, config=config, seed=0))
    pad = loaded.pad_token_id
    assert tables.side_stats(a)["tokens"] == sum(r.token_id != pad for r in a.tokens)
    assert tables.side_stats(h)["tokens"] == sum(r.token_id != pad for r in h.tokens)
    assert tables.side_stats(d)["tokens"] == sum(int((c.committed != pad).sum()) for c in d.canvases)
    padded = Trace.from_dict(a.to_dict())
    padded.start.pad_token_id = a.tokens[0].token_id  # as if the model had written pad first
    stats = tables.side_stats(padded)
    assert stats["tokens"] == len(a.tokens) - sum(r.token_id == a.tokens[0].token_id for r in a.tokens)
    if stats["tokens"] == 0:
        assert stats["TTFT (s)"] == "—"


def run_app(argv: list[str]) -> int:
    from dg.ui import app

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.argv", ["app.py", *argv])
        with pytest.raises(SystemExit) as exit_:
            app.main()
    return exit_.value.code


def run_cli_race(argv: list[str]) -> int:
    from dg import cli

    return cli.main(["race", *argv])


@pytest.mark.parametrize("main, prefix", [(run_app, "app.py"), (run_cli_race, "error")])
def test_an_ar_model_without_room_is_one_line_and_exit_code_2(checkpoint_dir, ar_model_dir, monkeypatch, capsys,
                                                              main, prefix):
    import dg.devices

    monkeypatch.setattr(dg.devices, "free_memory", lambda device: {torch.device("cpu"): 0})
    code = main(["--model", str(checkpoint_dir), "--ar-model", str(ar_model_dir)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{prefix}: --ar-model {ar_model_dir} needs") and "always fits" in err


class CountingTurns(Turns):
    """Turns that count how often a run hands the model on."""

    def __init__(self):
        super().__init__()
        self.handovers = 0

    def step_done(self, ticket, counted=True):
        self.handovers += 1
        super().step_done(ticket, counted)


def test_a_hybrid_run_hands_the_model_on_per_pass_not_per_verified_token(loaded, config, inputs):
    turns = CountingTurns()
    run = LiveRun.of(loaded, "hybrid", inputs, config, 0, turns=turns).start()
    assert run.wait(60)
    trace = run.snapshot()
    assert len(trace.tokens) > len(trace.rounds) + 1  # rounds that verify several tokens at once
    assert turns.handovers == 1 + len(trace.steps) + len(trace.rounds)  # the start, every draft step and verify pass
