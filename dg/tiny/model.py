"""Configuration, construction and loading of the tiny DiffusionGemma.

`TinyModelConfig` is the single source of the tiny model's sizes; `build_model` turns it into a real
`DiffusionGemmaForBlockDiffusion` (MoE router, self-conditioning block and Gemma 4 vision tower
included, only small), with special-token ids read from the processor's tokenizer.

    python -m dg.tiny.model --processor DIR     # print the parameter count for the default sizes
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

import torch
from transformers import (
    AutoProcessor,
    DiffusionGemmaConfig,
    DiffusionGemmaForBlockDiffusion,
    DiffusionGemmaTextConfig,
    Gemma4VisionConfig,
)

from dg.config import SamplerConfig
from dg.tiny.tokenizer import TokenizerConfig, special_ids


@dataclass
class TinyModelConfig:
    """Sizes of the tiny DiffusionGemma. See the model card for why these values."""

    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 1
    head_dim: int = 32
    intermediate_size: int = 256
    num_experts: int = 4
    top_k_experts: int = 2
    moe_intermediate_size: int = 128
    canvas_length: int = 64
    sliding_window: int = 512  # longer than any tiny prompt + reply, so sliding layers see everything
    vision_hidden_size: int = 128
    vision_layers: int = 2
    vision_heads: int = 4
    patch_size: int = 16  # must agree with the image processor
    pooling_kernel_size: int = TokenizerConfig.pooling_kernel_size  # must agree with the image processor
    vision_max_patches_per_side: int = 128  # the release's 10,240-row table would be 2.6 M params here
    max_new_tokens: int = 128  # two canvases: thinking + answer (TrainConfig widens it for sums of more terms)

    def __post_init__(self):
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                     "intermediate_size", "num_experts", "top_k_experts", "moe_intermediate_size", "canvas_length",
                     "vision_hidden_size", "vision_layers", "vision_heads", "max_new_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads, got {self.num_key_value_heads}"
            )
        if self.top_k_experts > self.num_experts:
            raise ValueError(f"top_k_experts must be <= num_experts ({self.num_experts}), got {self.top_k_experts}")
        if self.sliding_window < 2 * self.canvas_length:
            raise ValueError(f"sliding_window must be >= 2 * canvas_length, got {self.sliding_window}")


def build_config(sizes: TinyModelConfig, tokenizer) -> DiffusionGemmaConfig:
    """The `DiffusionGemmaConfig` for `sizes`, vocabulary and special ids taken from `tokenizer`."""
    ids = special_ids(tokenizer)
    text = DiffusionGemmaTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=sizes.hidden_size,
        intermediate_size=sizes.intermediate_size,
        num_hidden_layers=sizes.num_hidden_layers,
        num_attention_heads=sizes.num_attention_heads,
        num_key_value_heads=sizes.num_key_value_heads,
        head_dim=sizes.head_dim,
        global_head_dim=sizes.head_dim,  # the release's 512-wide global heads would dwarf a tiny model
        num_experts=sizes.num_experts,
        top_k_experts=sizes.top_k_experts,
        moe_intermediate_size=sizes.moe_intermediate_size,
        sliding_window=sizes.sliding_window,
        layer_types=["sliding_attention"] * (sizes.num_hidden_layers - 1) + ["full_attention"],
        max_position_embeddings=4 * sizes.sliding_window,
        pad_token_id=ids["pad"], eos_token_id=ids["eos"], bos_token_id=ids["bos"],
    )
    vision = Gemma4VisionConfig(
        hidden_size=sizes.vision_hidden_size,
        intermediate_size=2 * sizes.vision_hidden_size,
        num_hidden_layers=sizes.vision_layers,
        num_attention_heads=sizes.vision_heads,
        num_key_value_heads=sizes.vision_heads,
        head_dim=sizes.vision_hidden_size // sizes.vision_heads,
        patch_size=sizes.patch_size,
        pooling_kernel_size=sizes.pooling_kernel_size,
        position_embedding_size=sizes.vision_max_patches_per_side,
    )
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=vision,
        boi_token_id=ids["boi_token"],
        eoi_token_id=ids["eoi_token"],
        image_token_id=ids["image_token"],
        canvas_length=sizes.canvas_length,
    )


def generation_config(tokenizer, max_new_tokens: int):
    """The release's sampler defaults (report Algorithm 1) with this tokenizer's EOS and pad ids."""
    ids = special_ids(tokenizer)
    return SamplerConfig(max_new_tokens=max_new_tokens).generation_config(
        eos_token_id=[ids["eos"], ids["turn_end"]], pad_token_id=ids["pad"], bos_token_id=ids["bos"])


def build_model(sizes: TinyModelConfig, processor, seed: int = 0) -> DiffusionGemmaForBlockDiffusion:
    """A freshly initialised tiny model (deterministic in `seed`) with its generation config."""
    torch.manual_seed(seed)
    config = build_config(sizes, processor.tokenizer)
    config._attn_implementation = "sdpa"
    model = DiffusionGemmaForBlockDiffusion(config)
    model.generation_config = generation_config(processor.tokenizer, sizes.max_new_tokens)
    return model


def parameter_counts(model) -> dict[str, int]:
    """Unique parameters (tied encoder/decoder weights counted once), total and per part."""
    seen, parts = set(), {"text": 0, "vision": 0}
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        parts["vision" if "vision" in name else "text"] += p.numel()
    parts["total"] = parts["text"] + parts["vision"]
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processor", required=True, help="a saved processor directory")
    args = parser.parse_args()
    sizes = TinyModelConfig()
    model = build_model(sizes, AutoProcessor.from_pretrained(args.processor))
    print(asdict(sizes))
    print(parameter_counts(model))


if __name__ == "__main__":
    main()
