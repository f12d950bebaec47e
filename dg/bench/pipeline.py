"""diffusers' `DiffusionGemmaPipeline` with its `EntropyBoundScheduler`, on the weights dg runs, for the bench.

The pipeline is built from the model and processor `dg.loading.load` returns, unchanged, with the sampler's
knobs (entropy bound, temperatures, step cap, confidence threshold, stability) and the same token budget, so
`python -m dg.bench` times both on the same prompts (`dg_vs_diffusers_time_ratio`). Its prompt ids are dg's:
the pipeline applies the chat template itself, here with dg's switches (thinking; control tokens typed by a
user stay text). It stops after the canvas holding its one EOS id, the end of the model's turn.

    python -m dg.bench --repeats 1
"""

from dataclasses import dataclass

import torch

from dg.bench.common import timed
from dg.config import SamplerConfig
from dg.prompts import TURN_CLOSE


@dataclass
class ChatTemplate:
    """The processor as the pipeline calls it (`apply_chat_template`, `tokenizer`), with dg's template switches,
    so the pipeline encodes exactly the ids `dg.prompts.build_inputs` does."""

    processor: object
    thinking: bool = False

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    def apply_chat_template(self, messages, **kwargs):
        return self.processor.apply_chat_template(messages, enable_thinking=self.thinking,
                                                  sanitize_control_tokens=True, **kwargs)


def build_pipeline(loaded, thinking: bool = False):
    """The pipeline on `loaded`'s model, its scheduler set from `loaded`'s sampler defaults, no progress bar."""
    from diffusers import DiffusionGemmaPipeline, EntropyBoundScheduler

    config = loaded.sampler_config
    scheduler = EntropyBoundScheduler(entropy_bound=config.entropy_bound, t_max=config.t_max, t_min=config.t_min,
                                      num_inference_steps=config.max_denoising_steps)
    pipe = DiffusionGemmaPipeline(model=loaded.model, scheduler=scheduler,
                                  processor=ChatTemplate(loaded.processor, thinking))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def run_pipeline(pipe, prompt: dict, config: SamplerConfig, eos_ids, seed: int) -> dict:
    """One timed call on `prompt` (bench_prompts' dict): wall time, the reply's ids up to its first EOS
    (included, as dg counts tokens), and the denoising steps the pipeline ran."""
    steps = []

    def count_step(pipeline, step, timestep, callback_kwargs):
        steps.append(step)
        return {}

    device = pipe.model.device
    end_of_turn = pipe.processor.tokenizer.convert_tokens_to_ids(TURN_CLOSE)
    generator = torch.Generator(device=device).manual_seed(seed)
    out, wall = timed(lambda: pipe(
        prompt=prompt["text"], image=prompt.get("image"), gen_length=config.max_new_tokens,
        num_inference_steps=config.max_denoising_steps, eos_token_id=end_of_turn,
        stability_threshold=config.stability_threshold, confidence_threshold=config.confidence_threshold,
        generator=generator, output_type="seq", callback_on_step_end=count_step), device)
    ids = out.sequences[0].tolist()
    ends = [i for i, token in enumerate(ids) if token in set(eos_ids)]
    ids = ids[: ends[0] + 1] if ends else ids
    return {"wall_s": wall, "tokens": len(ids), "ids": ids, "decoder_steps": len(steps)}
