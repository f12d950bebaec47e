"""The model benchmark on the tiny random checkpoint: one prompt, one repeat, small shapes.

    python -m pytest tests/bench -q
"""

import pytest

from dg.bench.models import bench_models, bench_prompts
from dg.loading import load

HEADLINE = ("dg_vs_reference_time_ratio", "diffusion_vs_ar_speedup", "tpf")


def test_model_bench_reports_positive_finite_ratios_and_dg_equals_generate(checkpoint_dir, one_thread,
                                                                           positive_finite):
    loaded = load(checkpoint_dir)
    loaded.sampler_config = loaded.sampler_config.replace(max_denoising_steps=6)
    result = bench_models(loaded, bench_prompts()[:1], repeats=1, max_new_tokens=32)
    summary = result["summary"]
    for key in (*HEADLINE, "decoder_step_vs_ar_token_cost", "decoder_step_ms", "ar_token_ms"):
        assert positive_finite(summary[key]), (key, summary[key])
    assert summary["dg_matches_generate"] is True  # same seed, torch backend: token for token
    assert {row["mode"] for row in result["rows"]} == {"dg diffusion", "generate()", "dg AR", "dg hybrid",
                                                      "diffusers pipeline"}
    assert positive_finite(summary["dg_vs_diffusers_time_ratio"]) and summary["diffusers_decoder_steps"] >= 1
    assert summary["answers_right"]["of"] == 1 and 0 <= summary["answers_right"]["diffusers"] <= 1
    assert summary["hybrid_equals_ar"] == 1.0  # hybrid's tokens are greedy AR's, up to its EOS
    for key in ("hybrid_vs_ar_speedup", "hybrid_vs_diffusion_speed", "hybrid_tokens_per_round"):
        assert positive_finite(summary[key]), (key, summary[key])
    assert set(summary["hybrid_speedup_by_skill"]) == {"json"}
    for row in result["rows"]:
        assert positive_finite(row["wall_s"]) and positive_finite(row["effective_tok_s"])
    # speedup ≈ TPF / (step cost / AR token cost) holds exactly with one repeat
    assert summary["diffusion_vs_ar_speedup"] == pytest.approx(
        summary["tpf"] / summary["decoder_step_vs_ar_token_cost"], rel=1e-6)
    # with one prompt the per-skill ratio is the whole one; it is AR's wall over diffusion's for the same tokens
    walls = {row["mode"]: row["wall_s"] for row in result["rows"]}
    assert summary["speedup_by_skill"] == {"json": pytest.approx(walls["dg AR"] / walls["dg diffusion"])}
    assert summary["speedup_by_skill"]["json"] == pytest.approx(summary["diffusion_vs_ar_speedup"], rel=1e-6)


def test_the_bench_prompts_are_the_skills_where_diffusion_should_win():
    prompts = bench_prompts()
    assert [p["skill"] for p in prompts] == ["json", "story", "sudoku", "arithmetic"]
    assert [p["thinking"] for p in prompts] == [False, False, False, True]  # the trace is what arithmetic shows


def test_three_term_sums_give_each_mode_s_accuracy_and_hybrid_s_speed_over_ar(one_thread, positive_finite):
    from dg.bench.models import three_term

    result = three_term(load(), 2)
    assert result["n"] == 2 and set(result["accuracy"]) == {"diffusion", "ar", "hybrid"}
    assert result["accuracy"]["hybrid"] == result["accuracy"]["ar"]  # the same tokens, so the same answers
    assert all(0.0 <= a <= 1.0 for a in result["accuracy"].values())
    assert positive_finite(result["hybrid_vs_ar_speedup"])
