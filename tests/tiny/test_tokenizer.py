"""The tiny model's tokenizer and processor: Gemma 4 specials, chat format, offline round trip."""

import pytest
from PIL import Image
from transformers import AutoProcessor

from dg.tiny.tokenizer import CHANNEL_END, CHANNEL_START, TURN_END, TokenizerConfig, reply_text, special_ids


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


def test_chat_template_renders_the_gemma4_turn_format(processor):
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    text = processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<bos><|turn>user\nWhat is 2 + 2?<turn|>\n<|turn>model\n"


def test_thinking_puts_think_at_the_top_of_a_system_turn(processor):
    tok = processor.tokenizer
    alone = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                    add_generation_prompt=True, enable_thinking=True)
    assert alone == "<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    with_system = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert with_system.startswith("<bos><|turn>system\n<|think|>Be brief.<turn|>\n")
    assert with_system.count("<|think|>") == 1


def test_reply_format_puts_the_thought_channel_before_the_answer():
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
    assert out["pixel_values"].shape[1] == 630  # 70 soft tokens x 3x3 pooling


@pytest.mark.parametrize("field, value", [("vocab_size", 10), ("corpus_size", 0), ("max_soft_tokens", 64)])
def test_tokenizer_config_rejects_impossible_values(field, value):
    with pytest.raises(ValueError, match=field):
        TokenizerConfig(**{field: value})
