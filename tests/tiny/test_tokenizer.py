"""The tiny model's tokenizer and processor: Gemma 4 specials, chat format, offline round trip."""

import pytest
from PIL import Image
from transformers import AutoProcessor

from dg.prompts import reply_text
from dg.tiny.tokenizer import CHANNEL_END, CHANNEL_START, TURN_END, TokenizerConfig, special_ids


def test_pad_eos_bos_keep_the_release_ids(processor):
    ids = special_ids(processor.tokenizer)
    assert (ids["pad"], ids["eos"], ids["bos"]) == (0, 1, 2)
    assert processor.tokenizer.pad_token_id == 0 and processor.tokenizer.eos_token_id == 1


def test_every_gemma4_special_token_is_one_token(processor):
    tok = processor.tokenizer
    for token in ("<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|image>", "<|image|>",
                  "<image|>", "<|audio>", "<|audio|>", "<audio|>", "<|video|>"):
        assert len(tok(token, add_special_tokens=False)["input_ids"]) == 1, token


def test_digits_are_single_tokens(processor):
    tok = processor.tokenizer
    pieces = tok.convert_ids_to_tokens(tok("123 + 4567 = 4690", add_special_tokens=False)["input_ids"])
    digits = [p.lstrip("▁") for p in pieces if any(c.isdigit() for c in p)]
    assert all(len(d) == 1 for d in digits), pieces


def test_text_round_trips_through_spaces_and_byte_fallback(processor):
    tok = processor.tokenizer
    text = 'Solve the sudoku: 1.24/423./.1.2/2413 → {"name": "Zoë"} ☃\nok'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert any(t.startswith("<0x") for t in tok.convert_ids_to_tokens(ids))  # ☃ is not in the corpus


THINKING_OFF = "<bos><|turn>user\n{text}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"
THINKING_ON = "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\n{text}<turn|>\n<|turn>model\n"


def render(processor, messages, **kwargs):
    return processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)


def test_thinking_off_renders_the_release_prompt_with_an_empty_thought_channel(processor):
    text = render(processor, [{"role": "user", "content": "What is 2 + 2?"}])
    assert text == THINKING_OFF.format(text="What is 2 + 2?")


def test_thinking_on_renders_the_release_prompt_with_think_in_a_system_turn(processor):
    text = render(processor, [{"role": "user", "content": "Hi"}], enable_thinking=True)
    assert text == THINKING_ON.format(text="Hi")


def test_a_system_prompt_is_plain_string_content_after_think(processor):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render(processor, messages) == (
        "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>")
    with_thinking = render(processor, messages, enable_thinking=True)
    assert with_thinking == "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"


def test_the_processor_renders_the_same_strings_as_the_tokenizer(processor):
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    for thinking in (False, True):
        assert processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             enable_thinking=thinking) == render(processor, messages,
                                                                                 enable_thinking=thinking)


def test_reply_format_opens_the_thought_channel_only_when_thinking():
    assert reply_text("42") == f"42{TURN_END}"
    assert reply_text("42", "6*7") == f"{CHANNEL_START}thought\n6*7{CHANNEL_END}42{TURN_END}"


def test_processor_round_trips_offline_and_expands_an_image(processor, tmp_path):
    processor.save_pretrained(tmp_path)
    loaded = AutoProcessor.from_pretrained(tmp_path)
    assert type(loaded).__name__ == "Gemma4Processor"
    assert loaded.image_processor.max_soft_tokens == 70
    text = "What colour is the circle?"
    assert loaded.tokenizer(text)["input_ids"] == processor.tokenizer(text)["input_ids"]
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = loaded.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    out = loaded(text=prompt, images=[Image.new("RGB", (224, 224), "white")], return_tensors="pt")
    ids, tok = out["input_ids"][0].tolist(), loaded.tokenizer
    n_soft = ids.count(tok.image_token_id)
    assert 0 < n_soft <= 70
    start = ids.index(tok.convert_tokens_to_ids("<|image>"))
    assert ids[start + 1 + n_soft] == tok.convert_tokens_to_ids("<image|>")
    assert out["pixel_values"].shape[1] == 70 * TokenizerConfig().pooling_kernel_size ** 2  # patches


@pytest.mark.parametrize("field, value", [("vocab_size", 10), ("corpus_size", 0), ("max_soft_tokens", 64)])
def test_tokenizer_config_rejects_impossible_values(field, value):
    with pytest.raises(ValueError, match=field):
        TokenizerConfig(**{field: value})
