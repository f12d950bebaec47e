"""Chat prompts in, model inputs out (`check_inputs`: what a model cannot take, refused before a pass runs);
generated text in, thought and answer out.

Inputs go through the checkpoint's own chat template (`processor.apply_chat_template`, with
`enable_thinking`), so the embedded model and the release prompt the same way (the release's exact
strings, pinned by transformers' DiffusionGemma integration test):
- thinking off: `<bos><|turn>user\\n{text}<turn|>\\n<|turn>model\\n<|channel>thought\\n<channel|>` (an
  empty thought channel is pre-filled; the model writes the answer, then `<turn|>`);
- thinking on: `<bos><|turn>system\\n<|think|>\\n<turn|>\\n<|turn>user\\n{text}<turn|>\\n<|turn>model\\n`; the
  model writes `<|channel>thought\\n … <channel|>`, the answer, then `<turn|>`;
- a system prompt is string content: `<|turn>system\\n{system}<turn|>\\n` (`<|think|>\\n` first when
  thinking is on); a list of parts would render a trailing space or a Python repr with the release's
  template.

User text is text: prompt and system strings are passed with `sanitize_control_tokens=True`, so a
`<turn|>`, `<|think|>`, `<bos>` or `<|image|>` typed by a user is encoded as ordinary text pieces and
only the template writes control tokens (decoded, those pieces read back as the typed characters).
"""

import os
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from dg.config import SamplerConfig, whole_canvases

MAX_IMAGE_PIXELS = 4096 * 4096  # larger uploads are refused rather than decoded
MAX_PROMPT_CHARS = 20_000
TURN_OPEN, TURN_CLOSE = "<|turn>", "<turn|>"
THINK = "<|think|>"
THOUGHT_OPEN, THOUGHT_CLOSE = "<|channel>", "<channel|>"
THOUGHT_LABEL = "thought\n"
# dropped from displayed replies besides the tokenizer's own special tokens
CONTROL_TOKENS = (TURN_CLOSE, TURN_OPEN, "<eos>", "<pad>", "<bos>", THINK)


def open_image(image) -> Image.Image:
    """A PIL image from a path or an image; a clear ValueError for anything that is not one, or one too
    large to decode safely (the pixel count is read from the header before any decoding)."""
    if isinstance(image, Image.Image):
        img = image
    else:
        path = os.fspath(image)
        try:
            with Image.open(path) as probe:
                _check_pixels(*probe.size, name=f"image {path}")
                probe.load()
                img = probe.copy()
        except FileNotFoundError:
            raise ValueError(f"image not found: {path}") from None
        except Image.DecompressionBombError:  # PIL's own guard fires before ours for the largest headers
            raise ValueError(f"image {path} is larger than {MAX_IMAGE_PIXELS} pixels") from None
        except (UnidentifiedImageError, OSError, SyntaxError, EOFError) as err:  # PIL's errors for broken files
            raise ValueError(f"not an image: {path} ({err})") from None
    _check_pixels(img.width, img.height, name="image")
    return img.convert("RGB")


def _check_pixels(width: int, height: int, name: str) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise ValueError(f"{name} is {width}×{height}: larger than {MAX_IMAGE_PIXELS} pixels")


def check_text(text, name: str = "prompt") -> str:
    """`text` as a str that the tokenizer can encode: not empty, not huge, valid Unicode."""
    if text is not None and not isinstance(text, str):
        raise ValueError(f"{name} must be text, got {type(text).__name__}")
    if text is None or not text.strip():
        raise ValueError(f"{name} is empty: type some text")
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"{name} is {len(text)} characters; the limit is {MAX_PROMPT_CHARS}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate, e.g. undecodable bytes on a command line
        raise ValueError(f"{name} is not valid Unicode: {text[err.start]!r} at character {err.start} "
                         "(a lone surrogate, e.g. bytes that are not UTF-8)") from None
    return text


def encode_text(tokenizer, text, name: str = "text") -> list[int]:
    """User text as plain token pieces, without the chat template (the Learn tab's answer to noise): a
    typed control token stays its characters."""
    return tokenizer.encode(check_text(text, name), add_special_tokens=False, split_special_tokens=True)


def build_messages(text: str, images=(), system: str | None = None) -> list[dict]:
    """One user turn (images first, then the text), after a system turn whose content is a string."""
    text = check_text(text)
    messages = []
    if system is not None and str(system).strip():
        messages.append({"role": "system", "content": check_text(system, "system prompt")})
    content = [{"type": "image", "image": open_image(img)} for img in images or ()]
    content.append({"type": "text", "text": text})
    messages.append({"role": "user", "content": content})
    return messages


def build_inputs(processor, text: str, images=None, thinking: bool = False, system: str | None = None,
                 device=None) -> dict:
    """Model inputs (input_ids, attention_mask, pixel_values, …) for one user turn, through a processor's chat
    template or a bare tokenizer's (a separate AR model: text only)."""
    if images is not None and not isinstance(images, (list, tuple)):
        images = [images]
    messages = build_messages(text, images, system)
    inputs = processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt",
        enable_thinking=thinking, sanitize_control_tokens=True)
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


def reply_text(answer: str, thought: str | None = None) -> str:
    """The model turn as the model writes it after the generation prompt (the writer `parse_reply` reads).

    Thinking on: the model opens the thought channel itself; thinking off: the prompt already holds
    the empty channel, so the reply is the answer and `<turn|>`.
    """
    if thought:
        return f"{THOUGHT_OPEN}{THOUGHT_LABEL}{thought}{THOUGHT_CLOSE}{answer}{TURN_CLOSE}"
    return f"{answer}{TURN_CLOSE}"


def decode_reply(tokenizer, token_ids) -> Reply:
    """Decode generated ids and split them; special tokens other than the thought markers are dropped."""
    text = tokenizer.decode(list(token_ids), skip_special_tokens=False)
    return parse_reply(text, (*tokenizer.all_special_tokens, *CONTROL_TOKENS))


def check_inputs(model, inputs: dict, config: SamplerConfig) -> None:
    """Refuse, before any pass runs, what the model cannot take: a prompt plus token budget (whole
    canvases) beyond its positions, or an image with more patches along one side than the vision
    tower has position embeddings (a very thin picture: it would fail half-way with an IndexError)."""
    limit = model.config.get_text_config().max_position_embeddings
    canvas = model.config.canvas_length
    prompt = inputs["input_ids"].shape[1]
    budget = whole_canvases(config.max_new_tokens, canvas) * canvas
    if limit is not None and prompt + budget > limit:
        raise ValueError(f"prompt is {prompt} tokens; with max_new_tokens {config.max_new_tokens} "
                         f"({budget} canvas tokens) that exceeds the model's {limit} positions")
    patches = inputs.get("image_position_ids")
    vision = getattr(model.config, "vision_config", None)
    if patches is not None and vision is not None:
        side = int(patches.max()) + 1  # padding patches are -1
        if side > vision.position_embedding_size:
            raise ValueError(f"the image is too elongated for the vision tower: {side} patches along one "
                             f"side, at most {vision.position_embedding_size}; crop it closer to square")
