"""`python -m dg generate`: JSON output, seed parity with generate(), exit code 2 on bad input."""

import json
import subprocess
import sys

import pytest
import torch

from dg.cli import main
from dg.loading import load
from dg.prompts import build_inputs


def test_json_output_has_the_documented_keys_and_matches_generate(checkpoint_dir, capsys):
    args = ["generate", "--model", str(checkpoint_dir), "--prompt", "Compute 7 + 8.", "--seed", "3",
            "--max-denoising-steps", "5", "--max-new-tokens", "32", "--backend", "torch", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("text", "thought", "token_ids", "forward_passes", "tokens_per_forward", "seconds", "steps"):
        assert key in out, key
    assert out["steps"] and "accepted" in out["steps"][0]
    loaded = load(checkpoint_dir, device="cpu")
    inputs = build_inputs(loaded.processor, "Compute 7 + 8.")
    torch.manual_seed(3)
    ref = loaded.model.generate(**inputs, **loaded.sampler_config.replace(
        max_denoising_steps=5, max_new_tokens=32).generate_kwargs())
    ids = ref.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    while ids and ids[-1] == 0:
        ids.pop()
    assert out["token_ids"] == ids


def test_ar_mode_and_the_live_view_print_a_summary(checkpoint_dir, capsys):
    assert main(["generate", "--model", str(checkpoint_dir), "--prompt", "Hi", "--mode", "ar",
                 "--max-new-tokens", "4"]) == 0
    assert "forward passes" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--prompt", " "], "prompt is empty"),
    (["--prompt", "hi", "--entropy-bound", "0"], "entropy_bound"),
    (["--prompt", "hi", "--t-min", "0.9", "--t-max", "0.5"], "t_max"),
    (["--prompt", "hi", "--max-denoising-steps", "0"], "max_denoising_steps"),
    (["--prompt", "hi", "--max-new-tokens", "-1"], "max_new_tokens"),
    (["--prompt", "hi", "--image", "/etc/hostname"], "not an image"),
])
def test_bad_input_exits_2_with_a_one_line_message(checkpoint_dir, capsys, extra, message):
    assert main(["generate", "--model", str(checkpoint_dir), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_unknown_model_path_exits_2_from_the_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dg", "generate", "--model", str(tmp_path / "x"), "--prompt", "hi"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not found" in proc.stderr and "Traceback" not in proc.stderr
