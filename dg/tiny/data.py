"""Skill examples → token ids, canvas targets and training batches for the tiny DiffusionGemma.

One example becomes the chat prompt (via the processor, images expanded to soft-token placeholders)
and the model turn the model must write (`reply_text`). A batch carries everything one training
forward needs: the clean sequence for the encoder (and its AR loss), one canvas per example to
denoise, and the 2-D `decoder_attention_mask` that hides that canvas's clean tokens (and later
ones) from the decoder. Used by `python -m dg.tiny.train`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from dg.prompts import build_messages, reply_text
from dg.tiny.skills import Example
from dg.tiny.tokenizer import special_ids

IGNORE_INDEX = -100


@dataclass
class Encoded:
    """One example as token ids; `pixel_values` / `image_position_ids` are (1, P, D) / (1, P, 2) or None."""

    prompt_ids: list[int]
    reply_ids: list[int]
    pixel_values: torch.Tensor | None = None
    image_position_ids: torch.Tensor | None = None
    canvas_index: int | None = None  # the canvas to denoise; None: one drawn uniformly per batch


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, L) prompt + clean reply, right-padded
    attention_mask: torch.Tensor  # (B, L)
    ar_labels: torch.Tensor  # (B, L) next token of the model turn, IGNORE_INDEX elsewhere
    canvas_targets: torch.Tensor  # (B, C) the clean canvas to denoise (pad after the reply)
    decoder_attention_mask: torch.Tensor  # (B, L + C) cache positions before the canvas, then the canvas
    decoder_position_ids: torch.Tensor  # (B, C) the canvas's true positions
    mm_token_type_ids: torch.Tensor  # (B, L) 1 on image placeholders
    pixel_values: torch.Tensor | None = None  # (N_images, P, D)
    image_position_ids: torch.Tensor | None = None  # (N_images, P, 2)


def encode_example(example: Example, processor) -> Encoded:
    """Prompt through the chat template (thinking on iff the example has a thought) + the model turn."""
    tokenizer = processor.tokenizer
    images = [example.image] if example.image is not None else []
    prompt = tokenizer.apply_chat_template(
        build_messages(example.prompt, images),
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=bool(example.thought),
    )
    reply_ids = tokenizer(reply_text(example.answer, example.thought), add_special_tokens=False)["input_ids"]
    if example.image is None:
        return Encoded(tokenizer(prompt, add_special_tokens=False)["input_ids"], reply_ids)
    out = processor(text=prompt, images=[example.image], return_tensors="pt")
    return Encoded(out["input_ids"][0].tolist(), reply_ids, out["pixel_values"], out["image_position_ids"])


def num_canvases(reply_len: int, canvas_length: int) -> int:
    """Canvases the reply spans: generation stops after the canvas holding `<turn|>`."""
    return max(1, math.ceil(reply_len / canvas_length))


def make_batch(items: list[Encoded], canvas_length: int, tokenizer, rng: random.Random) -> Batch:
    """Collate; for each example the canvas to denoise: its `canvas_index`, else one of the canvases its
    reply spans, drawn uniformly from `rng`."""
    ids = special_ids(tokenizer)
    lengths = [len(e.prompt_ids) + len(e.reply_ids) for e in items]
    batch, seq_len = len(items), max(lengths)
    input_ids = torch.full((batch, seq_len), ids["pad"], dtype=torch.long)
    attention_mask = torch.zeros((batch, seq_len), dtype=torch.long)
    ar_labels = torch.full((batch, seq_len), IGNORE_INDEX, dtype=torch.long)
    canvas_targets = torch.full((batch, canvas_length), ids["pad"], dtype=torch.long)
    decoder_attention_mask = torch.zeros((batch, seq_len + canvas_length), dtype=torch.bool)
    decoder_attention_mask[:, seq_len:] = True
    decoder_position_ids = torch.zeros((batch, canvas_length), dtype=torch.long)
    for i, (e, n) in enumerate(zip(items, lengths)):
        p = len(e.prompt_ids)
        input_ids[i, :n] = torch.tensor(e.prompt_ids + e.reply_ids)
        attention_mask[i, :n] = 1
        ar_labels[i, p - 1 : n - 1] = torch.tensor(e.reply_ids)  # position j predicts token j + 1
        k = e.canvas_index if e.canvas_index is not None else rng.randrange(num_canvases(len(e.reply_ids), canvas_length))
        chunk = e.reply_ids[k * canvas_length : (k + 1) * canvas_length]
        canvas_targets[i, : len(chunk)] = torch.tensor(chunk)
        start = p + k * canvas_length  # the decoder sees the prompt and earlier committed canvases only
        decoder_attention_mask[i, :start] = True
        decoder_position_ids[i] = torch.arange(start, start + canvas_length)
    images = [e for e in items if e.pixel_values is not None]
    return Batch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        ar_labels=ar_labels,
        canvas_targets=canvas_targets,
        decoder_attention_mask=decoder_attention_mask,
        decoder_position_ids=decoder_position_ids,
        mm_token_type_ids=(input_ids == ids["image_token"]).long(),
        pixel_values=torch.cat([e.pixel_values for e in images]) if images else None,
        image_position_ids=torch.cat([e.image_position_ids for e in images]) if images else None,
    )
