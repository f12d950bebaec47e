"""The CLI picks its CPU threads as the app does (dg.devices.share_cpu): on a busy 2-core machine two
threads ran ~5× slower than one."""

import os

import torch

from dg import cli


def test_the_cli_runs_with_the_apps_thread_count(checkpoint_dir, monkeypatch, capsys):
    picked = []
    monkeypatch.setattr(torch, "set_num_threads", picked.append)
    code = cli.main(["generate", "--model", str(checkpoint_dir), "--prompt", "hi", "--device", "cpu",
                     "--max-new-tokens", "16", "--max-denoising-steps", "2", "--json"])
    assert code == 0 and '"finish_reason"' in capsys.readouterr().out
    assert picked == [max(1, (os.cpu_count() or 2) // 2)]
