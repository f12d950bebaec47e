"""Which of the embedded model's five skills a prompt asks for, or None: outside what the tiny model knows.

The tiny model was trained on prompts its skill generators write (dg/tiny/skills.py, dg/tiny/pictures.py);
this matches a prompt against the same templates, so the app can say when a reply has no meaning (a free
question gets a fluent, templated reply all the same). Matching is on the template's shape, not its words
(any name, number or grid in the slots), so a user's own sudoku or sum counts as the skill.

    python -m dg.tiny.scope "Why is the sky blue?"      # prints: outside the five skills
"""

import re
import sys

from dg.tiny import pictures, skills

_SLOT = re.compile(r"\\\{(\w*)\\\}")  # a template's `{name}` after re.escape


def _template(text: str) -> str:
    """A generator's template as a pattern: each `{slot}` any words, numbers or a list of them."""
    return _SLOT.sub(r"[\\w ,+.]+?", re.escape(text))


_STORY = [_template(prompt) for prompt, _ in skills._STORY_TEMPLATES]
_JSON = [_template(prompt) for prompt in skills._JSON_PROMPTS]
_SUM = [_template(prompt) for prompt in skills._ADD_TEMPLATES]
_PICTURE = (r"How many shapes are in the picture\?", r"Describe the picture\.", r"What colour is the \w+\?",
            rf"What shape is in the ({'|'.join(map(re.escape, pictures.POSITIONS))})\?")
PATTERNS = {
    "sudoku": [r"Solve the sudoku: [1-4.]{4}(?:/[1-4.]{4}){3}"],
    "arithmetic": _SUM,
    "json": _JSON,
    "story": _STORY,
}


def skill_of(prompt: str, has_image: bool = False) -> str | None:
    """The skill whose generator writes prompts of this shape, else None; a picture question needs a picture."""
    text = " ".join(str(prompt or "").split())
    if has_image:
        return "picture" if any(re.fullmatch(p, text) for p in _PICTURE) else None
    return next((skill for skill, patterns in PATTERNS.items() if any(re.fullmatch(p, text) for p in patterns)), None)


def main() -> None:
    prompt = " ".join(sys.argv[1:])
    print(skill_of(prompt) or "outside the five skills")


if __name__ == "__main__":
    main()
