"""The shipped tiny checkpoint and its held-out evaluation (small n, so it stays fast)."""

import json
import random
import sys

import pytest
import torch
from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion

from dg.loading import EMBEDDED_MODEL, check_vocab, load
from dg.tiny import eval as tiny_eval
from dg.tiny import skills
from dg.prompts import build_inputs, decode_reply
from dg.tiny.tokenizer import special_ids

MAX_WEIGHTS_BYTES = 25 * 1024 * 1024


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(1)
    return load(EMBEDDED_MODEL)


def test_the_shipped_checkpoint_loads_offline_with_plain_transformers():
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(EMBEDDED_MODEL)
    processor = AutoProcessor.from_pretrained(EMBEDDED_MODEL)
    check_vocab(model, processor, exact=True)
    assert (EMBEDDED_MODEL / "model.safetensors").stat().st_size <= MAX_WEIGHTS_BYTES
    assert (EMBEDDED_MODEL / "README.md").exists()


def test_the_shipped_generation_config_has_the_release_sampler_defaults(loaded):
    model, processor = loaded.model, loaded.processor
    gen, ids = model.generation_config, special_ids(processor.tokenizer)
    assert (gen.max_denoising_steps, gen.t_min, gen.t_max) == (48, 0.4, 0.8)
    assert (gen.stability_threshold, gen.confidence_threshold) == (1, 0.005)
    assert gen.sampler_config.entropy_bound == 0.1
    assert gen.eos_token_id == [ids["eos"], ids["turn_end"]] and gen.pad_token_id == ids["pad"] == 0


def test_a_mismatched_tokenizer_fails_to_load(tmp_path):
    fresh = load(EMBEDDED_MODEL)  # its tokenizer is changed below: not the shared fixture
    model, processor = fresh.model, fresh.processor
    processor.tokenizer.add_tokens(["<extra_a>", "<extra_b>"])  # a tokenizer from another training run
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="vocab"):
        load(tmp_path)


def test_generate_writes_a_whole_sentence_and_ends_its_turn(loaded):
    """transformers' own generate() on the shipped weights gives a story-shaped reply, not noise."""
    example = skills.make_example("story", random.Random(11))
    tok = loaded.processor.tokenizer
    inputs = build_inputs(loaded.processor, example.prompt)
    torch.manual_seed(0)
    out = loaded.model.generate(**inputs)
    new_ids = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    assert special_ids(tok)["turn_end"] in new_ids
    answer = decode_reply(tok, new_ids).answer
    assert answer.endswith(".") and len(answer.split()) >= 6, answer


def test_eval_reports_every_skill_in_both_modes(loaded):
    result = tiny_eval.evaluate(tiny_eval.EvalConfig(seed=0, n=5, threads=1), loaded=loaded)
    assert set(result["skills"]) == set(skills.SKILLS)
    for stats in result["skills"].values():
        assert stats["n"] == 1
        assert 0 <= stats["diffusion_acc"] <= 1 and 0 <= stats["ar_acc"] <= 1
        assert stats["tpf"] > 0 and 1 <= stats["effective_steps"] <= 48
        assert stats["hybrid_equals_ar"] == 1.0 and stats["hybrid_acc"] == stats["ar_acc"]
        assert 0 < stats["hybrid_nfe"] <= stats["ar_nfe"]
    assert set(result["arithmetic_thinking"]) >= {"on", "off"}
    # one row per count of terms (the skill's two, and three: where direct answers fail) and digits,
    # each sum answered with thinking on and off
    rows = result["arithmetic_rows"]
    assert list(rows) == [f"{t}x{d}" for t in (2, 3) for d in skills.ADD_DIGITS]
    for row in rows.values():
        assert row["n"] == 1 and 0 <= row["on"] <= 1 and 0 <= row["off"] <= 1 and row["tpf_on"] > 0


def test_rows_of_longer_sums_get_a_token_budget_that_holds_their_trace(loaded, monkeypatch):
    budgets = []

    def generate(model, inputs, config):
        budgets.append(config.max_new_tokens)
        return real(model, inputs, config)

    real = tiny_eval.generate_diffusion
    monkeypatch.setattr(tiny_eval, "generate_diffusion", generate)
    cfg = tiny_eval.EvalConfig(seed=0, n=1, skills=("arithmetic",), ar=False, threads=1, add_terms=(2, 4))
    assert tiny_eval.row_terms(cfg.add_terms) == [2, 3, 4]
    tiny_eval.evaluate(cfg, loaded=loaded)
    checkpoint = loaded.sampler_config.max_new_tokens
    per_row = 2 * len(skills.ADD_DIGITS)  # a problem a row, answered with thinking on and off
    skill_runs, rows = budgets[:2], budgets[2:]  # the skill's problem, thinking on and off
    assert len(rows) == 3 * per_row
    assert set(skill_runs) == {checkpoint}
    for k, terms in enumerate((2, 3, 4)):
        assert set(rows[k * per_row:(k + 1) * per_row]) == {
            max(checkpoint, skills.longest_addition_reply(terms))}


def row(terms, digits, n, on, off):
    return {"terms": terms, "digits": digits, "n": n, "on": on, "off": off, "tpf_on": 9.0}


def test_the_thinking_gain_target_is_measured_on_the_sums_of_the_most_terms():
    rows = {"2x3": row(2, 3, 4, 1.0, 0.0), "3x3": row(3, 3, 4, 1.0, 0.75), "3x5": row(3, 5, 4, 0.75, 0.75)}
    result = {"skills": {}, "arithmetic_thinking": {"on": 1.0, "off": 0.0, "n": 4}, "mean_tpf": 9.0,
              "arithmetic_rows": rows}
    gain = tiny_eval.thinking_gain(rows)
    assert (gain["terms"], gain["n"]) == (3, 8) and gain["gain"] == pytest.approx(0.125)
    assert tiny_eval.targets(result)["thinking_gain>=20%"] is False  # two terms' +100 points don't count
    rows["3x5"]["off"] = 0.5
    assert tiny_eval.thinking_gain(rows)["gain"] == pytest.approx(0.25)
    assert tiny_eval.targets(result)["thinking_gain>=20%"] is True
    text = tiny_eval.table({**result, "mean_diffusion_acc": 1.0, "targets": tiny_eval.targets(result)})
    assert "| three 5-digit numbers | 4 | 75% | 50% | +25% | 9.00 |" in text
    assert "Sums of three numbers, all digit counts (8 problems): thinking on 88%, off 62%, gain +25%" in text


def test_long_replies_are_held_to_the_tpf_target_and_a_trace_counts_as_one():
    skill = {"n": 4, "diffusion_acc": 1.0, "ar_acc": 1.0, "effective_steps": 2.0, "nfe": 3.0, "ar_nfe": 9.0}
    result = {"skills": {"json": {**skill, "thinking": False, "tpf": 12.5},
                         "picture": {**skill, "thinking": False, "tpf": 4.0},
                         "arithmetic": {**skill, "thinking": True, "tpf": 11.9}},
              "mean_tpf": 9.5, "arithmetic_rows": {}}
    held = tiny_eval.targets(result)
    assert held["json_tpf>=12"] is True and held["arithmetic_tpf>=12"] is False
    assert "picture_tpf>=12" not in held  # short answers: TPF is bounded by half the reply
    result["skills"]["arithmetic"]["thinking"] = False  # answered directly, a sum is a few tokens
    assert "arithmetic_tpf>=12" not in tiny_eval.targets(result)


def test_eval_is_deterministic_in_its_seed(loaded):
    cfg = tiny_eval.EvalConfig(seed=3, n=2, skills=("json", "sudoku"), ar=False, threads=1)
    assert tiny_eval.evaluate(cfg, loaded=loaded) == tiny_eval.evaluate(cfg, loaded=loaded)


def test_the_json_flag_prints_one_json_object(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["eval", "--seed", "0", "--n", "1", "--skill", "story", "--no-ar",
                                      "--threads", "1", "--json"])
    tiny_eval.main()
    result = json.loads(capsys.readouterr().out)
    assert set(result["skills"]) == {"story"} and "arithmetic_thinking" in result
    assert result["arithmetic_rows"] == {}  # no arithmetic asked for, no rows


@pytest.mark.parametrize("field, value", [("n", 0), ("seed", -1), ("threads", 0), ("skills", ("poetry",)),
                                          ("add_terms", (1,))])
def test_impossible_eval_settings_are_rejected_by_name(field, value):
    with pytest.raises(ValueError, match=field if field != "skills" else "poetry"):
        tiny_eval.EvalConfig(**{field: value})
