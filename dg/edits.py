"""An edited canvas: a finished run's committed tokens, each pinned (held), free (a warm start) or blank.

Editing starts from a diffusion run's committed canvases with every position pinned. A person frees or
pins positions, blanks a range (free, its token a uniform random draw when the run starts, as the forward
process writes it) or writes text over positions (its tokens pinned). `to_draft` is the sampler's input:
`init_canvas` and `pinned` (1, n·C), the same `dg.drafts.Draft` that a draft with blanks gives, so a
re-denoised run is an ordinary diffusion run (`dg.sampler.stream_diffusion`, warm start + pins).
Positions are 0-based across all canvases (canvas k holds k·C … k·C + C − 1), as the canvas cells number them.

    python -m pytest tests/test_edits.py -q
"""

import re
from dataclasses import dataclass, replace

import torch

from dg.drafts import Draft
from dg.prompts import encode_text

SPAN = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")  # "12" or "12-20" (either order)
SHOWN_SPACE = "␣"  # how a cell shows a leading space: typed back, it is a space


@dataclass(frozen=True)
class CanvasEdit:
    """Tokens (None: blank) and pins of n whole canvases; immutable, every change returns a new edit."""

    ids: tuple[int | None, ...]
    pinned: tuple[bool, ...]
    canvas_length: int

    def __post_init__(self):
        if self.canvas_length < 1:
            raise ValueError(f"canvas_length must be >= 1, got {self.canvas_length}")
        if not self.ids or len(self.ids) % self.canvas_length or len(self.pinned) != len(self.ids):
            raise ValueError(f"an edit holds whole canvases of {self.canvas_length} tokens with a pin each, got "
                             f"{len(self.ids)} tokens and {len(self.pinned)} pins")
        if any(i is None and p for i, p in zip(self.ids, self.pinned)):
            raise ValueError("a blank position cannot be pinned: write a token there first")

    @classmethod
    def of_trace(cls, trace) -> "CanvasEdit":
        """Every committed canvas of a diffusion run, all pinned; a ValueError for a run without one."""
        if trace.start is None or trace.mode != "diffusion":
            raise ValueError(f"only a diffusion run's canvases can be edited, not a {trace.mode or 'missing'} run")
        if not trace.canvases:
            raise ValueError("the run committed no canvas: nothing to edit")
        ids = tuple(int(t) for c in trace.canvases for t in c.committed)
        return cls(ids, (True,) * len(ids), trace.start.canvas_length)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def counts(self) -> dict:
        """How many positions are pinned, free (a warm start the sampler may change) and blank."""
        blank = sum(i is None for i in self.ids)
        pinned = sum(self.pinned)
        return {"pinned": pinned, "free": len(self) - pinned - blank, "blank": blank}

    def span(self, text: str) -> range:
        """"12" or "12-20" (a range, ends included, either order) as positions; a ValueError names a bad one."""
        match = SPAN.fullmatch(str(text or ""))
        if match is None:
            raise ValueError(f"cells must be a position or a range like 12-20, got {text!r}")
        a, b = int(match.group(1)), int(match.group(2) or match.group(1))
        a, b = min(a, b), max(a, b)
        if b >= len(self):
            raise ValueError(f"cell {b} is past the canvas: positions run from 0 to {len(self) - 1}")
        return range(a, b + 1)

    def toggled(self, pos: int) -> "CanvasEdit":
        """Pin a free position, free a pinned one; a blank one stays blank (write a token there to pin it)."""
        (pos,) = self.span(str(pos))
        if self.ids[pos] is None:
            return self
        return self.with_pins(range(pos, pos + 1), not self.pinned[pos])

    def with_pins(self, positions: range, pinned: bool) -> "CanvasEdit":
        """`positions` pinned or freed (blank positions stay blank and free)."""
        pins = list(self.pinned)
        for pos in positions:
            pins[pos] = pinned and self.ids[pos] is not None
        return replace(self, pinned=tuple(pins))

    def blanked(self, positions: range) -> "CanvasEdit":
        """`positions` blank: free, their tokens drawn at random when the run starts."""
        ids, pins = list(self.ids), list(self.pinned)
        for pos in positions:
            ids[pos], pins[pos] = None, False
        return replace(self, ids=tuple(ids), pinned=tuple(pins))

    def written(self, tokenizer, start: int, text: str) -> "CanvasEdit":
        """`text`'s tokens over the positions from `start` on, pinned (a shown ␣ is a space; control tokens
        typed stay their characters); a ValueError when they run past the canvas."""
        tokens = encode_text(tokenizer, str(text or "").replace(SHOWN_SPACE, " "), "text to write")
        if start + len(tokens) > len(self):
            raise ValueError(f"{len(tokens)} tokens from cell {start} run past the canvas's {len(self)} cells")
        ids, pins = list(self.ids), list(self.pinned)
        ids[start:start + len(tokens)] = tokens
        pins[start:start + len(tokens)] = [True] * len(tokens)
        return replace(self, ids=tuple(ids), pinned=tuple(pins))

    def to_draft(self, vocab_size: int, generator: torch.Generator | None = None) -> Draft:
        """The sampler's warm start: blanks drawn uniformly over the vocabulary, every pin held."""
        noise = torch.randint(0, vocab_size, (1, len(self)), generator=generator)
        blank = torch.tensor([[i is None for i in self.ids]])
        ids = torch.where(blank, noise, torch.tensor([[0 if i is None else i for i in self.ids]]))  # (1, n·C)
        return Draft(ids, torch.tensor([self.pinned]), len(self))
