"""Tokenizer and processor of the tiny DiffusionGemma.

A small SentencePiece-style BPE (`▁` for spaces, byte fallback, one token per digit) trained with
`tokenizers` on the synthetic skills corpus, wrapped as a `GemmaTokenizer` with the Gemma 4 special
tokens and chat template, and bundled into a `Gemma4Processor` (tokenizer + image, audio and video
processors) that round-trips through `save_pretrained` / `AutoProcessor.from_pretrained` offline.

    python -m dg.tiny.tokenizer --out DIR      # build from the skills corpus and save
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer
from transformers import (
    Gemma4AudioFeatureExtractor,
    Gemma4ImageProcessor,
    Gemma4Processor,
    Gemma4VideoProcessor,
    GemmaTokenizer,
)

# Ids 0/1/2 match the released checkpoint; the rest of the table is ours (tiny vocabulary).
SPECIAL_TOKENS = (
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
    "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>",
    "<|image>", "<|image|>", "<image|>", "<|audio>", "<|audio|>", "<audio|>", "<|video|>",
)
# Names Gemma4Processor reads from the tokenizer (`tokenizer.image_token_id`, ...).
MULTIMODAL_TOKENS = {
    "image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
    "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>",
}
TURN_START, TURN_END, THINK = "<|turn>", "<turn|>", "<|think|>"
CHANNEL_START, CHANNEL_END = "<|channel>", "<channel|>"
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))

# The release's Gemma 4 / DiffusionGemma format (pinned by transformers' DiffusionGemma integration
# test): `<bos>`, turns `<|turn>ROLE\n … <turn|>\n`, system content is a plain string; thinking on
# opens the system turn with `<|think|>\n` (a system turn is made when there is none); thinking off
# pre-fills an empty thought channel after `<|turn>model\n`, so the model writes the answer directly.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- set thinking = enable_thinking is defined and enable_thinking -%}"
    "{%- set rest = messages -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- '<|turn>system\\n' + ('<|think|>\\n' if thinking else '') + messages[0]['content'] + '<turn|>\\n' -}}"
    "{%- set rest = messages[1:] -%}"
    "{%- elif thinking -%}"
    "{{- '<|turn>system\\n<|think|>\\n<turn|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in rest -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<|turn>' + role + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{- '<|image|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|turn>model\\n' + ('' if thinking else '<|channel>thought\\n<channel|>') -}}"
    "{%- endif -%}"
)


@dataclass
class TokenizerConfig:
    """Single source of the tokenizer's sizes."""

    vocab_size: int = 2048
    corpus_seed: int = 7
    corpus_size: int = 20_000
    max_soft_tokens: int = 70  # Gemma 4 allows 70/140/280/560/1120; 70 = 630 patches of 16 px, pooled 3x3
    patch_size: int = 16
    # 2×2 pooling: 64 soft tokens from 256 patches (a 3×3 pool needs 576, 2.3× the vision cost; a 1×1
    # pool is not usable: transformers' pooler then keeps the padding rows instead of the patches)
    pooling_kernel_size: int = 2

    def __post_init__(self):
        floor = len(SPECIAL_TOKENS) + len(BYTE_TOKENS) + 64
        if self.vocab_size < floor:
            raise ValueError(f"vocab_size must be >= {floor}, got {self.vocab_size}")
        if self.corpus_size <= 0:
            raise ValueError(f"corpus_size must be > 0, got {self.corpus_size}")
        if self.max_soft_tokens not in (70, 140, 280, 560, 1120):
            raise ValueError(f"max_soft_tokens must be one of 70/140/280/560/1120, got {self.max_soft_tokens}")


def _pipeline(tok: Tokenizer) -> Tokenizer:
    """SentencePiece-style text handling: spaces become `▁` and start a piece; digits and punctuation
    stand alone (so a JSON record or a carry trace is as many tokens as a real Gemma tokenizer makes)."""
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("▁", behavior="merged_with_next"),
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Punctuation(behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    return tok


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train the BPE, then rebuild it so byte tokens are ordinary vocabulary (not added tokens)."""
    reserved = SPECIAL_TOKENS + BYTE_TOKENS
    scratch = _pipeline(Tokenizer(BPE(unk_token="<unk>")))
    trainer = BpeTrainer(vocab_size=vocab_size, special_tokens=list(reserved), show_progress=False)
    scratch.train_from_iterator(texts, trainer=trainer)
    model = json.loads(scratch.to_str())["model"]
    vocab = {token: i for i, token in enumerate(reserved)}
    for token, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = _pipeline(Tokenizer(BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)))
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return tok


def wrap_tokenizer(tok: Tokenizer) -> GemmaTokenizer:
    """The `GemmaTokenizer` the processor expects, with the Gemma 4 chat template."""
    return GemmaTokenizer(
        tokenizer_object=tok,
        bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
        extra_special_tokens=dict(MULTIMODAL_TOKENS),
        chat_template=CHAT_TEMPLATE,
        add_bos_token=False,  # the chat template writes <bos>
        padding_side="left",
    )


def build_processor(texts: Iterable[str], config: TokenizerConfig | None = None) -> Gemma4Processor:
    """Tokenizer + Gemma 4 image / audio / video processors, sized for the tiny vision tower."""
    config = config or TokenizerConfig()
    tokenizer = wrap_tokenizer(train_bpe(texts, config.vocab_size))
    image_processor = Gemma4ImageProcessor(
        patch_size=config.patch_size,
        max_soft_tokens=config.max_soft_tokens,
        pooling_kernel_size=config.pooling_kernel_size,
    )
    return Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=Gemma4VideoProcessor(),
        chat_template=CHAT_TEMPLATE,
        image_seq_length=config.max_soft_tokens,
    )


def special_ids(tokenizer) -> dict[str, int]:
    """Ids of the tokens the model, data and sampler need, read from the tokenizer (never hard-coded)."""
    ids = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in (
        ("pad", "<pad>"), ("eos", "<eos>"), ("bos", "<bos>"), ("turn_start", TURN_START), ("turn_end", TURN_END),
        ("think", THINK), ("channel_start", CHANNEL_START), ("channel_end", CHANNEL_END),
    )}
    ids.update({name: tokenizer.convert_tokens_to_ids(tok) for name, tok in MULTIMODAL_TOKENS.items()})
    return ids


def small_processor() -> Gemma4Processor:
    """A real Gemma4Processor around a small BPE (400 tokens) trained on a slice of the skills corpus, in a
    few seconds: the tests' processor."""
    from dg.tiny.skills import corpus

    return build_processor(corpus(0, 300), TokenizerConfig(vocab_size=400, corpus_size=300))


def main() -> None:
    from dg.tiny import skills

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = TokenizerConfig()
    processor = build_processor(skills.corpus(config.corpus_seed, config.corpus_size), config)
    processor.save_pretrained(args.out)
    print(f"saved processor with {len(processor.tokenizer)} tokens to {args.out}")


if __name__ == "__main__":
    main()
