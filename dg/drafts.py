"""Drafts: text for the canvas, as a warm start or with blanks to infill.

A draft is the reply as the model would write it after the generation prompt (thinking off: the answer).
Without blanks it is a warm start: its tokens seed the canvases and the sampler may renoise any of them.
With blanks it is an infill: its text is pinned (never renoised) and only the blanks are denoised.

Blank syntax:
- `{{n}}`: exactly n free tokens;
- `{{...}}`: every position left in the budget (only at the end of a draft).
A draft with blanks that does not end in `{{...}}` is the whole reply: its turn ends right after its last
text (an EOS, then pad, pinned). Typed control tokens stay their characters, as in prompts
(`dg.prompts.encode_text`); each piece is tokenized on its own, so a blank is also a token boundary.

    python -m dg generate --prompt "Write a story." --draft "Tom had a dog. {{12}} The dog was happy."
"""

import re
from dataclasses import dataclass

import torch

from dg.config import whole_canvases
from dg.passes import eos_token_ids, pad_token_id
from dg.prompts import check_text

BLANK = re.compile(r"\{\{\s*(\d+|\.\.\.)\s*\}\}")
REST = "..."


@dataclass
class Draft:
    """What the sampler takes: `init_canvas` (1, n·C) and, for an infill, `pinned` of the same shape."""

    init_canvas: torch.Tensor
    pinned: torch.Tensor | None
    tokens: int  # positions the draft sets (text, blanks, its EOS)

    def __post_init__(self):
        if self.init_canvas is None:
            raise ValueError("pinned positions need init_canvas: the tokens they hold" if self.pinned is not None
                             else "a draft needs init_canvas: the canvases it seeds")

    @property
    def infill(self) -> bool:
        return self.pinned is not None

    def on(self, device) -> "Draft":
        """The same draft with its tensors on `device` (a worker process moves it to its model's)."""
        pinned = None if self.pinned is None else self.pinned.to(device)
        return Draft(self.init_canvas.to(device), pinned, self.tokens)

    @classmethod
    def of(cls, init_canvas: torch.Tensor, pinned: torch.Tensor | None = None) -> "Draft":
        """A draft of given canvases (1, n·C), every position set (an edited canvas, a test's warm start)."""
        return cls(init_canvas, pinned, init_canvas.shape[-1])


def parse_draft(text: str) -> list[str | int | None]:
    """The draft as pieces: text, a blank's size, or None for `{{...}}`; a misplaced rest is a ValueError."""
    check_text(text, "draft")
    pieces, at = [], 0
    for match in BLANK.finditer(text):
        if text[at:match.start()]:
            pieces.append(text[at:match.start()])
        pieces.append(None if match.group(1) == REST else int(match.group(1)))
        at = match.end()
    if text[at:]:
        pieces.append(text[at:])
    if None in pieces[:-1]:
        raise ValueError("draft: {{...}} (the rest of the budget) can only end a draft")
    if any(p == 0 for p in pieces if isinstance(p, int) and not isinstance(p, bool)):
        raise ValueError("draft: a blank {{n}} needs n >= 1")
    return pieces


def blank_generator(seed: int | None) -> torch.Generator | None:
    """The generator a draft's blanks are drawn from: its own, seeded with the run's `seed`, so the draft does not
    depend on what the global RNG drew before (None: the global RNG). The app and the CLI both draw through it."""
    return None if seed is None else torch.Generator().manual_seed(seed)


def draft_for(model, tokenizer, text: str, max_new_tokens: int, seed: int | None) -> Draft:
    """The draft of `text` for a run of `max_new_tokens` on `model`, its blanks from `blank_generator(seed)`."""
    generator = blank_generator(seed)
    return build_draft(tokenizer, text, canvas_length=model.config.canvas_length, max_new_tokens=max_new_tokens,
                       vocab_size=model.config.text_config.vocab_size, eos_token_id=eos_token_ids(model)[0],
                       pad_token_id=pad_token_id(model), generator=generator)


def build_draft(tokenizer, text: str, *, canvas_length: int, max_new_tokens: int, vocab_size: int,
                eos_token_id: int, pad_token_id: int, generator: torch.Generator | None = None) -> Draft:
    """The draft's canvases: text tokens at their places, blanks and the rest as uniform random tokens."""
    pieces = parse_draft(text)
    ids, free = [], []
    for piece in pieces:
        if isinstance(piece, str):
            ids += tokenizer.encode(piece, add_special_tokens=False, split_special_tokens=True)
            free += [False] * (len(ids) - len(free))
        elif piece is not None:
            ids += [pad_token_id] * piece
            free += [True] * piece
    blanks = any(not isinstance(p, str) for p in pieces)
    budget = whole_canvases(max_new_tokens, canvas_length) * canvas_length
    ends = blanks and pieces[-1] is not None
    used = len(ids) + (1 if ends else 0)
    if used > budget:
        raise ValueError(f"draft is {used} tokens; the token budget holds {budget} (raise max_new_tokens or "
                         "shorten the draft)")
    if ends:  # the whole reply: its turn ends here, then pad to the canvas's end
        ids.append(eos_token_id)
        free.append(False)
    length = budget if blanks and not ends else whole_canvases(len(ids), canvas_length) * canvas_length
    rest = length - len(ids)
    noise = torch.randint(0, vocab_size, (1, length), generator=generator)
    canvas = noise.clone()
    canvas[0, :len(ids)] = torch.tensor(ids)
    is_free = torch.tensor(free + [not ends] * rest)[None]
    if ends:
        canvas[0, len(ids):] = pad_token_id
    canvas = torch.where(is_free, noise, canvas)
    return Draft(canvas, ~is_free if blanks else None, len(ids))
