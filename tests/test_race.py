"""Races: both sides start together and stream live; each side records what a headless run of it
records; a separate AR model races through transformers' generate() with a recording streamer."""

import importlib.util
import math
import re
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client

from dg import race
from dg.ar import generate_ar
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion

PROMPT = "What is 12 + 30?"


@pytest.fixture(scope="module")
def ar_model_dir(tmp_path_factory, processor):
    """A tiny random causal LM (Llama architecture) with the tiny tokenizer and its chat template."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-ar")
    tok = processor.tokenizer
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                         max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.convert_tokens_to_ids("<turn|>"),
                                         bos_token_id=tok.bos_token_id))
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def finish(contest):
    for d, a in contest.frames(fps=100):
        pass
    return d, a


def test_a_race_streams_both_sides_and_each_records_its_forward_passes(loaded, config):
    contest = race.start_race(loaded, PROMPT, config=config, seed=0)
    d, a = finish(contest)
    assert d.done and a.done and d.mode == "diffusion" and a.mode == "ar"
    for trace in (d, a):
        stats = race.side_stats(trace)
        assert stats["forward passes"] > 0 and stats["finish"] in ("eos", "max_new_tokens")
        assert f"| forward passes | {stats['forward passes']} |" in race.side_table(trace)
    assert race.speedup(d, a) == pytest.approx(d.metrics()["effective_tok_s"] / a.metrics()["effective_tok_s"])


def test_each_side_of_a_race_records_what_its_headless_run_records(loaded, config):
    d, a = finish(race.start_race(loaded, PROMPT, config=config, seed=4))
    inputs = build_inputs(loaded.processor, PROMPT)
    torch.manual_seed(4)
    assert d.token_ids == generate_diffusion(loaded.model, inputs, config).token_ids
    greedy = generate_ar(loaded.model, inputs, config.max_new_tokens, loaded.eos_token_ids)
    assert a.token_ids == greedy.token_ids


def test_stopping_a_race_stops_both_sides_and_keeps_both_partial_traces(loaded):
    slow = loaded.sampler_config.replace(max_denoising_steps=128, max_new_tokens=1024, backend="torch")
    contest = race.start_race(loaded, PROMPT, config=slow, seed=0)
    for d, a in contest.frames(fps=100):
        if d.steps and a.tokens:
            contest.stop()
    assert d.end.finish_reason == "cancelled"
    assert a.end.finish_reason in ("cancelled", "eos")
    assert d.steps and a.tokens


def test_the_streamer_skips_the_prompt_and_stamps_every_token_in_order():
    records = []
    streamer = race.TraceStreamer(records.append, clock=0.0)
    streamer.put(torch.tensor([[5, 6, 7]]))  # the prompt
    streamer.put(torch.tensor([9]))
    streamer.put(torch.tensor([3]))
    streamer.end()
    assert [(r.index, r.token_id) for r in records] == [(0, 9), (1, 3)]
    assert records[0].t <= records[1].t and math.isnan(records[0].entropy)
    assert streamer.count == 2 and streamer.last_token == 3


def test_a_separate_ar_model_races_through_generate_and_records_its_own_tokens(loaded, config, ar_model_dir):
    ar_model = race.load_ar_model(str(ar_model_dir))
    contest = race.start_race(loaded, PROMPT, config=config, seed=0, ar_model=ar_model)
    d, a = finish(contest)
    assert contest.ar_tokenizer is ar_model.tokenizer and a.start.config["model"] == str(ar_model_dir)
    inputs = ar_model.inputs(PROMPT)
    with torch.no_grad():
        reference = ar_model.model.generate(**inputs, max_new_tokens=config.max_new_tokens, do_sample=False,
                                            pad_token_id=ar_model.eos_token_ids[0])
    assert a.token_ids == reference[0, inputs["input_ids"].shape[1]:].tolist()
    times = [r.t for r in a.tokens]
    assert times == sorted(times) and a.end.encoder_forwards == len(a.tokens)
    assert all(np.isfinite(r.entropy) and len(r.topk_ids) == race.TOPK for r in a.tokens)
    assert race.side_stats(a)["forward passes"] == len(a.tokens) and d.done



def test_the_app_races_a_separate_ar_model_given_with_ar_model(loaded, ar_model_dir, tmp_path):
    spec = importlib.util.spec_from_file_location("app", Path(__file__).resolve().parent.parent / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    threads = torch.get_num_threads()
    demo = app.build_app(loaded, race.load_ar_model(str(ar_model_dir)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo.launch(prevent_thread_lock=True, server_port=port, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=str(tmp_path))
        out = client.predict(prompt=PROMPT, thinking=False, seed=0, max_denoising_steps=6, max_new_tokens=16,
                             api_name="/race")
    finally:
        demo.close()
        torch.set_num_threads(threads)
    d_stats, a_stats = out[1], out[4]
    assert int(re.search(r"\| forward passes \| (\d+) \|", d_stats).group(1)) > 0
    assert int(re.search(r"\| forward passes \| (\d+) \|", a_stats).group(1)) > 0
    assert "AR ·" in out[3] and "Speedup" in out[8]
