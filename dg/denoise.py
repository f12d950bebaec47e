"""One decoder pass that tries to undo the forward process: what Learn's "predict" shows.

`denoise_once` encodes a prompt, then runs the decoder once on a canvas you choose (typically one
`dg.noise.corrupt` made), without self-conditioning, exactly as the sampler's first step sees it.

    python -c "from dg.loading import load; from dg.denoise import denoise_once; l = load(); print(denoise_once(
        l.model, l.processor, 'Compute 2 + 3.', [5, 6])['argmax'][:4])"
"""

import torch

from dg.config import SamplerConfig
from dg.prompts import check_inputs
from dg.passes import (TOPK, after_prefill, decode, decoder_mask, encode, entropy, new_cache, pad_token_id,
                       positions, split_inputs, top_k)
from dg.prompts import build_inputs


@torch.no_grad()
def denoise_once(model, processor, prompt: str, canvas_ids: list[int], *, thinking=False,
                 temperature: float | None = None, topk: int = TOPK) -> dict:
    """One decoder pass on `canvas_ids` after encoding `prompt`, without self-conditioning (as step 1).

    The canvas is padded with pad / truncated to the model's canvas length. τ defaults to the first
    step's temperature of the checkpoint's sampler config (t_max).
    """
    config = SamplerConfig.from_generation_config(model.generation_config)
    tau = float(config.temperature(config.max_denoising_steps)) if temperature is None else float(temperature)
    if not tau > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    canvas_length = model.config.canvas_length
    vocab_size = model.config.text_config.vocab_size
    ids = [int(i) for i in canvas_ids][:canvas_length]
    if any(not 0 <= i < vocab_size for i in ids):
        raise ValueError(f"canvas ids must be in [0, {vocab_size}), got {[i for i in ids if not 0 <= i < vocab_size]}")
    ids += [pad_token_id(model)] * (canvas_length - len(ids))
    device = model.device
    inputs = build_inputs(processor, prompt, thinking=thinking, device=device)
    check_inputs(model, inputs, config.replace(max_new_tokens=canvas_length))  # the prompt fits beside one canvas
    input_ids, extra = split_inputs(inputs)
    prompt_length = input_ids.shape[1]
    cache = new_cache(model)
    attention_mask = torch.ones((1, prompt_length), dtype=torch.bool, device=device)
    encode(model, input_ids, cache, positions(0, prompt_length, device), attention_mask, extra)
    canvas = torch.tensor([ids], device=device)  # (1, C)
    logits = decode(model, canvas, None, decoder_mask(model, canvas, cache, attention_mask), cache,
                    positions(prompt_length, canvas_length, device), after_prefill(extra))
    scaled = logits[0].float() / tau  # (C, V)
    probs, top = top_k(scaled, topk)  # (C, k)
    return {"canvas": ids, "temperature": tau, "argmax": scaled.argmax(-1).tolist(),
            "entropy": entropy(scaled).tolist(), "topk_ids": top.tolist(), "topk_probs": probs.tolist()}
