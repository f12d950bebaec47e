"""diffusers' DiffusionGemmaPipeline on the embedded model: dg's prompt ids, a right answer, counted steps.

    python -m pytest tests/bench/test_pipeline.py -q
"""

import torch

from dg.bench.models import bench_prompts
from dg.bench.pipeline import build_pipeline, run_pipeline
from dg.loading import load
from dg.prompts import build_inputs, decode_reply
from dg.tiny import skills


def test_the_pipeline_encodes_dg_s_prompt_ids_with_and_without_thinking():
    loaded = load()
    for prompt in bench_prompts():
        pipe = build_pipeline(loaded, prompt["thinking"])
        ids, _, _ = pipe._prepare_inputs(prompt=prompt["text"], messages=None, image=None, add_generation_prompt=True)
        ours = build_inputs(loaded.processor, prompt["text"], thinking=prompt["thinking"])["input_ids"]
        assert torch.equal(ids, ours), prompt["skill"]


def test_the_pipeline_runs_the_embedded_model_unchanged_and_answers_right(one_thread):
    loaded = load()
    prompt = bench_prompts()[0]  # json: a reply of one canvas
    config = loaded.sampler_config.replace(max_new_tokens=2 * loaded.model.config.canvas_length)
    result = run_pipeline(build_pipeline(loaded), prompt, config, loaded.eos_token_ids, seed=0)
    assert result["ids"][-1] in loaded.eos_token_ids and result["tokens"] == len(result["ids"])
    assert 1 <= result["decoder_steps"] <= config.max_denoising_steps * 2 and result["wall_s"] > 0
    assert skills.score(prompt["example"], decode_reply(loaded.tokenizer, result["ids"]).answer)
