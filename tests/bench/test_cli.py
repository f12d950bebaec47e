"""`python -m dg.bench`: one final JSON line with the headline figures, and the HTML report."""

import json

from dg.bench.cli import main

HEADLINE = ("dg_vs_reference_time_ratio", "diffusion_vs_ar_speedup", "tpf")


def test_cli_prints_a_final_json_line_and_writes_the_report(checkpoint_dir, tmp_path, capsys, one_thread,
                                                            positive_finite):
    report = tmp_path / "bench.html"
    line = main(["--model", str(checkpoint_dir), "--repeats", "1", "--prompts", "1", "--skip-step",
                 "--max-new-tokens", "16", "--threads", "1", "--three-term", "1", "--report", str(report)])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == line and all(positive_finite(printed[k]) for k in HEADLINE)
    assert report.exists() and "plotly" in report.read_text()
    assert set(printed["three_term_accuracy"]) == {"diffusion", "ar", "hybrid"}
