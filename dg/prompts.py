"""Chat prompts in, model inputs out; generated text in, thought and answer out.

Inputs go through the checkpoint's own chat template (`processor.apply_chat_template`, with
`enable_thinking`), so the embedded model and the release format prompts the same way: `<bos>`,
turns `<|turn>ROLE\\n … <turn|>\\n`, generation prompt `<|turn>model\\n`, and `<|think|>` at the top of
the system turn when thinking is on. A thinking reply reads `<|channel>thought\\n … <channel|>answer`.
"""

import os
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

MAX_IMAGE_PIXELS = 4096 * 4096  # larger uploads are refused rather than decoded
MAX_PROMPT_CHARS = 20_000
THOUGHT_OPEN = "<|channel>"
THOUGHT_CLOSE = "<channel|>"
THOUGHT_LABEL = "thought\n"
# dropped from displayed replies besides the tokenizer's own special tokens
CONTROL_TOKENS = ("<turn|>", "<|turn>", "<eos>", "<pad>", "<bos>", "<|think|>")


def open_image(image) -> Image.Image:
    """A PIL image from a path or an image; a clear ValueError for anything that is not one."""
    if isinstance(image, Image.Image):
        img = image
    else:
        path = os.fspath(image)
        try:
            with Image.open(path) as probe:
                size = probe.size
                if size[0] * size[1] > MAX_IMAGE_PIXELS:
                    raise ValueError(f"image {path} is {size[0]}×{size[1]}: larger than {MAX_IMAGE_PIXELS} pixels")
                probe.load()
                img = probe.copy()
        except FileNotFoundError:
            raise ValueError(f"image not found: {path}") from None
        except (UnidentifiedImageError, OSError) as err:
            raise ValueError(f"not an image: {path} ({err})") from None
    if img.width * img.height > MAX_IMAGE_PIXELS:
        raise ValueError(f"image is {img.width}×{img.height}: larger than {MAX_IMAGE_PIXELS} pixels")
    return img.convert("RGB")


def build_messages(text: str, images=(), system: str | None = None) -> list[dict]:
    if text is None or not str(text).strip():
        raise ValueError("prompt is empty: type a question or instruction")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"prompt is {len(text)} characters; the limit is {MAX_PROMPT_CHARS}")
    messages = []
    if system:
        messages.append({"role": "system", "content": [{"type": "text", "text": system}]})
    content = [{"type": "image", "image": open_image(img)} for img in images or ()]
    content.append({"type": "text", "text": text})
    messages.append({"role": "user", "content": content})
    return messages


def build_inputs(processor, text: str, images=None, thinking: bool = False, system: str | None = None,
                 device=None) -> dict:
    """Model inputs (input_ids, attention_mask, pixel_values, …) for one user turn."""
    if images is not None and not isinstance(images, (list, tuple)):
        images = [images]
    messages = build_messages(text, images, system)
    inputs = processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt",
        enable_thinking=thinking)
    inputs = dict(inputs)
    if device is not None:
        inputs = {k: v.to(device) if hasattr(v, "to") else v for k, v in inputs.items()}
    return inputs


@dataclass
class Reply:
    thought: str
    answer: str
    thinking: bool  # the reply opened a thought channel
    thought_closed: bool  # … and closed it (a known failure is a thought that fills every canvas)


def parse_reply(text: str, special_tokens=()) -> Reply:
    """Split decoded text (special tokens kept) into thought and answer, dropping end/pad tokens."""
    for token in special_tokens:
        if token not in (THOUGHT_OPEN, THOUGHT_CLOSE):
            text = text.replace(token, "")
    start = text.find(THOUGHT_OPEN)
    if start < 0:
        return Reply("", text.strip(), False, False)
    body = text[start + len(THOUGHT_OPEN):]
    if body.startswith(THOUGHT_LABEL):
        body = body[len(THOUGHT_LABEL):]
    end = body.find(THOUGHT_CLOSE)
    if end < 0:
        return Reply(body.strip(), "", True, False)
    answer = text[:start] + body[end + len(THOUGHT_CLOSE):]
    return Reply(body[:end].strip(), answer.strip(), True, True)


def split_thought(text: str, special_tokens=()) -> tuple[str, str]:
    reply = parse_reply(text, special_tokens)
    return reply.thought, reply.answer


def decode_reply(tokenizer, token_ids) -> Reply:
    """Decode generated ids and split them; special tokens other than the thought markers are dropped."""
    text = tokenizer.decode(list(token_ids), skip_special_tokens=False)
    return parse_reply(text, (*tokenizer.all_special_tokens, *CONTROL_TOKENS))
