"""Training the tiny DiffusionGemma: the loss falls, resuming is exact, the decoder cannot peek."""

import argparse
import collections
import copy
import json
import random

import pytest
import torch
from transformers import AutoProcessor

from dg.loading import EMBEDDED_MODEL, check_vocab
from dg.tiny import skills
from dg.tiny.data import encode_example, make_batch, num_canvases
from dg.tiny.model import TinyModelConfig, build_model
from dg.tiny.train import (SKILL_MIX, BatchStream, TrainConfig, batch_for_step, examples_for_step, losses,
                           make_optimizer, noise_levels, parse_mix, plausible_swaps, self_renoise, train)

MICRO = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=16, intermediate_size=64,
             num_experts=2, top_k_experts=1, moe_intermediate_size=32, canvas_length=16,
             vision_hidden_size=16, vision_layers=1, vision_heads=2)


def micro_config(out, **kwargs) -> TrainConfig:
    kwargs.setdefault("steps", 4)
    kwargs.setdefault("batch_size", 4)
    return TrainConfig(out=str(out), warmup_steps=50, threads=1,
                       model=TinyModelConfig(**MICRO), **kwargs)


@pytest.fixture(autouse=True)
def one_thread():
    """One thread: on a busy 2-core runner two OpenMP threads make these small ops several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def run_dir(tmp_path, processor):
    processor.save_pretrained(tmp_path / "processor")  # train() reuses it instead of building one
    return tmp_path


def test_the_loss_goes_down_on_a_fixed_batch(processor):
    cfg = micro_config("unused", lr=1e-2)
    model = build_model(cfg.model, processor).train()
    optimizer = make_optimizer(model, cfg)
    examples = skills.sample_examples(0, 4, ("sudoku", "json"))
    batch = make_batch([encode_example(e, processor) for e in examples], 16, processor.tokenizer, random.Random(0))
    history = []
    for _ in range(15):
        parts = losses(model, batch, cfg, torch.Generator().manual_seed(0))
        optimizer.zero_grad()
        parts["loss"].backward()
        optimizer.step()
        history.append({k: v.item() for k, v in parts.items()})
    assert history[-1]["diffusion"] < 0.7 * history[0]["diffusion"]
    assert history[-1]["ar"] < 0.7 * history[0]["ar"]


def test_resuming_continues_exactly_where_the_run_stopped(run_dir, processor, tmp_path_factory):
    straight = tmp_path_factory.mktemp("straight")
    processor.save_pretrained(straight / "processor")
    train(micro_config(straight, steps=3, batch_size=2))
    train(micro_config(run_dir, steps=2, batch_size=2))  # warmup spans every step: the same schedule
    train(micro_config(run_dir, steps=3, batch_size=2), resume=True)
    a = torch.load(straight / "checkpoint.pt", weights_only=True)
    b = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] == 3
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name


def test_the_decoder_cannot_see_the_clean_tokens_of_its_own_canvas(processor):
    """Scrambling the clean reply in the encoder's cache must not move the decoder's canvas logits."""
    model = build_model(TinyModelConfig(**MICRO), processor).eval()
    examples = skills.sample_examples(3, 6, ("sudoku", "arithmetic", "picture"))
    batch = make_batch([encode_example(e, processor) for e in examples], 16, processor.tokenizer, random.Random(0))

    def canvas_logits(b):
        enc = model.model.encoder(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                  pixel_values=b.pixel_values, image_position_ids=b.image_position_ids)
        return model(decoder_input_ids=b.canvas_targets, past_key_values=enc.past_key_values,
                     decoder_attention_mask=b.decoder_attention_mask,
                     decoder_position_ids=b.decoder_position_ids).logits

    scrambled = copy.deepcopy(batch)
    for i in range(len(examples)):
        start, end = int(batch.decoder_position_ids[i, 0]), int(batch.attention_mask[i].sum())
        scrambled.input_ids[i, start:end] = torch.randint(20, len(processor.tokenizer), (end - start,))
    prompt_changed = copy.deepcopy(batch)
    prompt_changed.input_ids[:, 3] = 50
    with torch.no_grad():
        reference = canvas_logits(batch)
        assert torch.equal(reference, canvas_logits(scrambled))
        assert not torch.allclose(reference, canvas_logits(prompt_changed))  # the prompt is visible


def test_each_example_denoises_one_of_the_canvases_its_reply_spans(processor):
    examples = skills.sample_examples(5, 8, ("arithmetic",))
    encoded = [encode_example(e, processor) for e in examples]
    batch = make_batch(encoded, 16, processor.tokenizer, random.Random(1))
    for i, e in enumerate(encoded):
        k = (int(batch.decoder_position_ids[i, 0]) - len(e.prompt_ids)) // 16
        assert 0 <= k < num_canvases(len(e.reply_ids), 16)
        visible = batch.decoder_attention_mask[i, : batch.input_ids.shape[1]]
        assert visible.sum() == len(e.prompt_ids) + 16 * k


def test_a_tokenizer_that_does_not_match_the_model_is_rejected(processor):
    model = build_model(TinyModelConfig(**MICRO), processor)
    model.config.text_config.vocab_size += 1
    with pytest.raises(ValueError, match="vocab"):
        check_vocab(model, processor, exact=True)


@pytest.mark.parametrize("field, value", [("steps", 0), ("minutes", 0), ("batch_size", 0), ("lr", -1.0),
                                          ("self_conditioning_p", 1.5), ("threads", 0), ("mix", ()), ("low_noise_p", 1.5),
                                          ("low_noise_max", 0.0), ("plausible_p", -0.1), ("self_renoise_p", 2.0), ("sc_noisier_p", -1.0),
                                          ("mix", ("sudoku", "chess"))])
def test_impossible_training_settings_are_rejected_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_init_continues_from_saved_weights_with_their_processor(run_dir, processor, tmp_path_factory):
    train(micro_config(run_dir, steps=2, batch_size=2))
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)["model"]
    follow = tmp_path_factory.mktemp("follow")
    cfg = micro_config(follow, steps=1, batch_size=2, lr=1e-9, init=str(run_dir / "model"))
    train(cfg)
    assert (follow / "processor" / "tokenizer.json").read_text() == (run_dir / "model" / "tokenizer.json").read_text()
    after = torch.load(follow / "checkpoint.pt", weights_only=True)
    assert after["step"] == 1 and not after["optimizer"]["state"] == {}
    for name, tensor in saved.items():  # one step at lr 1e-9 (warmup) barely moves the loaded weights
        assert torch.allclose(tensor, after["model"][name], atol=1e-6), name


def test_every_training_layout_fits_the_sliding_window_so_the_decoder_sees_what_the_sampler_does(processor):
    """A batch puts the canvas after the (hidden) clean reply; with the window longer than prompt + reply +
    canvas, sliding layers see the whole prompt there, as they do at inference."""
    sizes = TinyModelConfig()
    longest = max(len(e.prompt_ids) + len(e.reply_ids) for e in
                  (encode_example(x, processor) for x in skills.sample_examples(9, 100)))
    assert longest + sizes.canvas_length <= sizes.sliding_window


def test_a_mix_gives_each_skill_its_share_interleaved():
    mix = parse_mix("arithmetic=6, picture=4,sudoku=3,json=2,story=1")
    assert collections.Counter(mix) == {"arithmetic": 6, "picture": 4, "sudoku": 3, "json": 2, "story": 1}
    assert all(len(set(mix[i:i + 4])) >= 3 for i in range(len(mix) - 3))  # no long runs of one skill
    for bad in ("chess=2", "sudoku", "sudoku=0", "sudoku=-1", "sudoku=x"):
        with pytest.raises(argparse.ArgumentTypeError, match="skill=count"):
            parse_mix(bad)


def test_add_terms_sets_the_counts_of_terms_the_stream_draws():
    assert skills.parse_add_terms("2,3") == (2, 3)
    for bad in ("1", "2,x", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="counts of terms"):
            skills.parse_add_terms(bad)
    with pytest.raises(ValueError, match="add_terms"):
        TrainConfig(add_terms=(1,))
    assert TrainConfig().model.max_new_tokens == TinyModelConfig().max_new_tokens == 128
    cfg = TrainConfig(mix=("arithmetic",), add_terms=(3,))
    assert cfg.model.max_new_tokens == 4 * cfg.model.canvas_length
    drawn = [ex for step in range(4) for ex in examples_for_step(cfg, step)]
    assert all(ex.prompt.count("+") == 2 or " and " in ex.prompt and "," in ex.prompt for ex in drawn)


@pytest.mark.parametrize("terms", [2, 3, 4, 5])
def test_the_token_budget_holds_the_longest_reply_to_a_sum(terms):
    """All 9s carry in every column and give the longest answers: the worst case of each count of terms,
    in the embedded model's tokens (those `--init` training continues with)."""
    processor = AutoProcessor.from_pretrained(EMBEDDED_MODEL)
    nines = (10 ** max(skills.ADD_DIGITS) - 1,) * terms
    example = skills.Example("arithmetic", skills.addition_prompt("What is {sum}?", nines), str(sum(nines)),
                             skills.addition_trace(*nines), None, target=str(sum(nines)))
    reply = len(encode_example(example, processor).reply_ids)
    assert reply <= skills.longest_addition_reply(terms) < reply + 20  # a bound, and a tight one
    budget = TrainConfig(add_terms=(2, terms)).model.max_new_tokens
    assert budget % TinyModelConfig.canvas_length == 0 and reply <= budget < reply + TinyModelConfig.canvas_length


def test_the_stream_keeps_the_mix_across_steps_whatever_the_batch_size():
    cfg = TrainConfig(batch_size=3, mix=SKILL_MIX)
    seen = collections.Counter(ex.skill for step in range(len(SKILL_MIX)) for ex in examples_for_step(cfg, step))
    assert seen == collections.Counter(SKILL_MIX * cfg.batch_size)


def test_length_buckets_batch_the_same_examples_with_less_pad(processor):
    """A pool of `bucket` steps holds exactly those steps' examples, cut into full batches of like lengths."""
    def sequences(batch):
        return sorted(tuple(row[mask.bool()].tolist()) for row, mask in zip(batch.input_ids, batch.attention_mask))

    def pad(batches):
        return sum(int((b.attention_mask == 0).sum()) for b in batches)

    plain, pooled = TrainConfig(batch_size=8, bucket=1), TrainConfig(batch_size=8, bucket=4)
    unsorted = [batch_for_step(plain, step, processor) for step in range(4)]
    stream = BatchStream(pooled, processor)
    sorted_ = [stream(step) for step in range(4)]
    assert sorted(s for b in sorted_ for s in sequences(b)) == sorted(s for b in unsorted for s in sequences(b))
    assert all(b.input_ids.shape[0] == 8 for b in sorted_)
    assert pad(sorted_) < pad(unsorted)
    assert all(torch.equal(batch_for_step(pooled, step, processor).input_ids, sorted_[step].input_ids)
               for step in (0, 3))  # a resumed run gets the same batch as the stream
    with pytest.raises(ValueError, match="bucket"):
        TrainConfig(bucket=0)


def test_the_throughput_report_measures_each_configuration(capsys, monkeypatch):
    from dg.tiny import throughput
    monkeypatch.setattr("sys.argv", ["throughput", "--buckets", "1", "2", "--steps", "2", "--rounds", "1", "--json"])
    throughput.main()
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {row["bucket"]: row for row in report["configs"]}
    assert set(rows) == {1, 2} and rows[1]["ratio_to_first"] == 1.0
    for row in rows.values():
        assert 0 < row["examples_per_s"] <= row["examples_per_s_step"] and 0 <= row["pad_share"] < 1


def test_low_noise_weighting_draws_that_share_of_levels_below_its_cap():
    n = 20_000
    plain = noise_levels(n, TrainConfig(), torch.Generator().manual_seed(0))
    assert torch.equal(plain, TrainConfig().eps + (1 - TrainConfig().eps) * torch.rand(n, generator=torch.Generator().manual_seed(0)))
    cfg = TrainConfig(low_noise_p=0.5, low_noise_max=0.2)
    t = noise_levels(n, cfg, torch.Generator().manual_seed(0))
    assert cfg.eps <= float(t.min()) and float(t.max()) <= 1
    # half below 0.2 by choice, plus a fifth of the uniform half: 0.5 + 0.5 * 0.2 = 0.6
    assert abs(float((t < 0.2).float().mean()) - 0.6) < 0.02


def test_plausible_swaps_take_tokens_of_the_same_canvas_at_replaced_positions_only():
    targets = torch.stack([torch.arange(100, 164), torch.arange(200, 264)])
    gen = torch.Generator().manual_seed(0)
    replaced = torch.rand(targets.shape, generator=gen) < 0.5
    noisy = torch.where(replaced, torch.full_like(targets, 7), targets)  # 7: a "uniform" replacement
    out = plausible_swaps(targets, noisy, replaced, 0.5, gen)
    assert torch.equal(out[~replaced], targets[~replaced])  # clean positions stay clean
    swapped = replaced & (out != 7)
    assert all(int(out[r, c]) in set(targets[r].tolist()) for r, c in swapped.nonzero().tolist())
    assert abs(swapped.sum().item() / replaced.sum().item() - 0.5) < 0.15
    assert torch.equal(plausible_swaps(targets, noisy, replaced, 0.0, gen), noisy)


def test_self_renoising_refills_replaced_positions_of_chosen_rows_from_the_first_pass():
    noisy = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
    replaced = torch.tensor([[True, False, True, False], [True, True, False, False]])
    logits = torch.full((2, 4, 10), -1e4)
    logits[:, :, 3] = 0.0  # the first pass is sure of token 3 everywhere
    out = self_renoise(noisy, replaced, logits, torch.tensor([True, False]), torch.Generator().manual_seed(0))
    assert out.tolist() == [[3, 6, 3, 8], [5, 6, 7, 8]]


def test_a_training_step_with_every_noise_knob_on_runs(processor, tmp_path):
    cfg = micro_config(tmp_path, steps=1, batch_size=4, low_noise_p=0.5, plausible_p=0.5, self_renoise_p=1.0,
                       sc_noisier_p=0.5, self_conditioning_p=1.0)
    model = build_model(cfg.model, processor, seed=0)
    batch = make_batch([encode_example(e, processor) for e in skills.sample_examples(3, 4)],
                       cfg.model.canvas_length, processor.tokenizer, random.Random(0))
    parts = losses(model, batch, cfg, torch.Generator().manual_seed(0))
    assert torch.isfinite(parts["loss"])
    parts["loss"].backward()


def test_the_self_conditioning_pass_sees_a_noisier_canvas_than_the_pass_it_conditions(processor, tmp_path,
                                                                                      monkeypatch):
    """As in the sampler, where step n's self-conditioning comes from step n - 1, which saw more noise."""
    from dg.tiny import train as train_module

    seen = {}
    real = train_module.self_conditioning_logits

    def spy(model, kwargs, use_sc, t):
        seen["first"], seen["t_first"] = kwargs["decoder_input_ids"].clone(), t.clone()
        return real(model, kwargs, use_sc, t)

    def second_pass_inputs(sc_noisier_p):
        monkeypatch.setattr(train_module, "self_conditioning_logits", spy)
        cfg = micro_config(tmp_path, steps=1, batch_size=8, self_conditioning_p=1.0, sc_noisier_p=sc_noisier_p)
        model = build_model(cfg.model, processor, seed=0)
        batch = make_batch([encode_example(e, processor) for e in skills.sample_examples(3, 8)],
                           cfg.model.canvas_length, processor.tokenizer, random.Random(0))
        gen = torch.Generator().manual_seed(0)
        t = noise_levels(8, cfg, gen)  # the levels losses() draws first from the same seed
        losses(model, batch, cfg, torch.Generator().manual_seed(0))
        return batch.canvas_targets, t

    targets, t = second_pass_inputs(0.0)
    assert torch.equal(seen["t_first"], t)  # off: the first pass is the second pass's canvas
    clean_first_off = (seen["first"] == targets).float().mean()
    second_pass_inputs(1.0)
    assert bool((seen["t_first"] >= t).all()) and bool((seen["t_first"] > t).any())
    assert (seen["first"] == targets).float().mean() < clean_first_off  # fewer clean tokens to lean on
