"""Tiny random-weights DiffusionGemma models and checkpoints for tests and benchmarks (same transformers class).

    python -c "from dg.testing import tiny_random_model; print(tiny_random_model())"
"""

import torch

from dg.config import SamplerConfig

TEST_MAX_NEW_TOKENS = 64  # the generation config's budget: four 16-token canvases


def tiny_processor():
    """A real Gemma4Processor around a small BPE trained on the skills corpus (a few seconds)."""
    from dg.tiny.skills import corpus
    from dg.tiny.tokenizer import TokenizerConfig, build_processor

    return build_processor(corpus(0, 300), TokenizerConfig(vocab_size=400, corpus_size=300))


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


# --- release-shaped rehearsal -------------------------------------------------------------------
RELEASE_VOCAB = 262_144  # google/diffusiongemma-26B-A4B-it's vocabulary, canvas and EOS ids
RELEASE_CANVAS = 256
RELEASE_EOS = (1, 106, 50)
_ONSETS = ("", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "st", "tr",
           "ch", "sh", "br", "pl")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "ng")


def pseudo_words(n: int, seed: int = 0) -> list[str]:
    """n distinct word-like pieces (half start a word with `▁`, as SentencePiece pieces do), 1–3 syllables:
    a canvas of random ids from a release-sized vocabulary reads like text of real widths, not like ids."""
    import random

    rng, words, seen = random.Random(seed), [], set()
    while len(words) < n:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(rng.choice((1, 1, 2, 2, 2, 3))))
        piece = ("▁" if rng.random() < 0.5 else "") + word
        if piece not in seen:
            seen.add(piece)
            words.append(piece)
    return words


def release_vocab_processor(processor, vocab_size: int = RELEASE_VOCAB):
    """`processor` with its tokenizer's vocabulary filled up to `vocab_size` by pseudo-words: encoding is
    unchanged (no merges reach them), every id a release-sized model can sample decodes to a readable piece."""
    import json

    from tokenizers import Tokenizer
    from transformers import Gemma4Processor

    from dg.tiny.tokenizer import CHAT_TEMPLATE, wrap_tokenizer

    spec = json.loads(processor.tokenizer.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    if len(processor.tokenizer) > vocab_size:
        raise ValueError(f"the tokenizer already has {len(processor.tokenizer)} tokens, more than {vocab_size}")
    fresh = (w for w in pseudo_words(vocab_size) if w not in vocab)
    while len(vocab) < vocab_size - len(spec["added_tokens"]) + sum(t["id"] < len(vocab) for t in spec["added_tokens"]):
        vocab[next(fresh)] = len(vocab)
    tokenizer = wrap_tokenizer(Tokenizer.from_str(json.dumps(spec)))
    if len(tokenizer) != vocab_size:
        raise ValueError(f"built {len(tokenizer)} tokens, wanted {vocab_size}")
    return Gemma4Processor(feature_extractor=processor.feature_extractor, image_processor=processor.image_processor,
                           tokenizer=tokenizer, video_processor=processor.video_processor,
                           chat_template=CHAT_TEMPLATE, image_seq_length=processor.image_seq_length)


def release_shaped_checkpoint(path, processor, *, vocab_size: int = RELEASE_VOCAB, canvas_length: int = RELEASE_CANVAS,
                              hidden_size: int = 64, sharpen: float = 1.0, max_new_tokens: int | None = None,
                              max_denoising_steps: int | None = None):
    """A random-weights checkpoint shaped like the release where the UI feels it (vocabulary, canvas,
    EOS ids [1, 106, 50]) and small where only compute would (hidden size, layers), saved with a
    processor whose vocabulary matches. `sharpen` > 1 makes canvases settle as a trained model's do."""
    big = release_vocab_processor(processor, vocab_size)
    model = tiny_model_for(big, sharpen=sharpen, vocab_size=vocab_size, canvas_length=canvas_length,
                           hidden_size=hidden_size)
    changes = {"max_new_tokens": max_new_tokens or canvas_length}
    if max_denoising_steps is not None:
        changes["max_denoising_steps"] = max_denoising_steps
    model.generation_config = SamplerConfig(**changes).generation_config(
        eos_token_id=list(RELEASE_EOS), pad_token_id=0, bos_token_id=2)
    model.save_pretrained(path, safe_serialization=True)
    model.generation_config.save_pretrained(path)
    big.save_pretrained(path)
    return model
