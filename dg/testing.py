"""Tiny random-weights DiffusionGemma models and checkpoints for tests and benchmarks (same transformers class).

    python -c "from dg.testing import tiny_random_model; print(tiny_random_model())"
"""

import torch

from dg.config import SamplerConfig

TEST_MAX_NEW_TOKENS = 64  # the generation config's budget: four 16-token canvases


def tiny_config(vocab_size: int = 512, canvas_length: int = 16, hidden_size: int = 64, layers: int = 2,
                special_ids: dict | None = None, pooling_kernel_size: int = 3):
    """A DiffusionGemma config small enough to run a full generate() in milliseconds on a CPU.

    `pooling_kernel_size` must be the image processor's: it sets how many patches make one soft token.
    """
    from transformers import DiffusionGemmaConfig, DiffusionGemmaTextConfig, Gemma4VisionConfig

    special_ids = special_ids or {}
    text = DiffusionGemmaTextConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        global_head_dim=32, num_experts=4, top_k_experts=2, moe_intermediate_size=hidden_size,
        sliding_window=64, layer_types=["sliding_attention"] * (layers - 1) + ["full_attention"],
        max_position_embeddings=4096, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    vision = Gemma4VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                                pooling_kernel_size=pooling_kernel_size)
    return DiffusionGemmaConfig(
        text_config=text, vision_config=vision, canvas_length=canvas_length,
        image_token_id=special_ids.get("image_token_id", vocab_size - 1),
        boi_token_id=special_ids.get("boi_token_id", vocab_size - 2),
        eoi_token_id=special_ids.get("eoi_token_id", vocab_size - 3))


def tiny_random_model(seed: int = 0, eos_token_ids=(1,), sharpen: float = 1.0, **config_kwargs):
    """Random-init model in eval mode with the release's sampler defaults as its generation config.

    `sharpen` scales the tied embedding, so logits get peaky and canvases settle (as a trained model's do).
    """
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(tiny_config(**config_kwargs)).eval()
    model.generation_config = SamplerConfig(max_new_tokens=TEST_MAX_NEW_TOKENS).generation_config(
        eos_token_id=list(eos_token_ids), pad_token_id=0, bos_token_id=2)
    if sharpen != 1.0:
        with torch.no_grad():
            model.lm_head.weight.mul_(sharpen)
    return model


def tiny_model_for(processor, seed: int = 0, sharpen: float = 1.0, **config_kwargs):
    """A random tiny model that speaks `processor`'s language: its vocabulary, image and EOS ids, its pooling."""
    tok = processor.tokenizer
    special = {"image_token_id": tok.convert_tokens_to_ids("<|image|>"),
               "boi_token_id": tok.convert_tokens_to_ids("<|image>"),
               "eoi_token_id": tok.convert_tokens_to_ids("<image|>")}
    eos = [tok.convert_tokens_to_ids(t) for t in ("<eos>", "<turn|>")]
    config_kwargs.setdefault("vocab_size", len(tok))
    config_kwargs.setdefault("canvas_length", 16)
    config_kwargs.setdefault("pooling_kernel_size", processor.image_processor.pooling_kernel_size)
    return tiny_random_model(seed, eos_token_ids=eos, sharpen=sharpen, special_ids=special, **config_kwargs)


def tiny_random_checkpoint(path, processor=None, seed: int = 0, **config_kwargs):
    """Save a random tiny model (and a processor, when given) as a loadable checkpoint folder."""
    if processor is not None:
        model = tiny_model_for(processor, seed, **config_kwargs)
    else:
        model = tiny_random_model(seed, **config_kwargs)
    model.save_pretrained(path, safe_serialization=True)
    model.generation_config.save_pretrained(path)
    if processor is not None:
        processor.save_pretrained(path)
    return model
