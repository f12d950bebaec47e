"""The Race tab through the real server: a separate AR model given with --ar-model races through generate(); a
new race first clears the last one's chart and result."""

import re

from gradio_client import Client

from dg.loading import load_ar_model
from dg.ui.app import serve

PROMPT = "What is 12 + 30?"
CHART, RESULT = 7, 8  # outputs of /race: both sides (canvas, stats, text), status, chart, result, picker


def test_the_app_races_a_separate_ar_model_given_with_ar_model(loaded, ar_model_dir, tmp_path):
    with serve(loaded, load_ar_model(str(ar_model_dir))) as url:
        client = Client(url, verbose=False, download_files=str(tmp_path))
        out = client.predict(prompt=PROMPT, thinking=False, seed=0, max_denoising_steps=6, max_new_tokens=16,
                             api_name="/race")
    d_stats, a_stats = out[1], out[4]
    assert int(re.search(r"\| forward passes \| (\d+) \|", d_stats).group(1)) > 0
    assert int(re.search(r"\| forward passes \| (\d+) \|", a_stats).group(1)) > 0
    assert "AR ·" in "".join(out[3]) and "Speedup" in out[8]


def test_a_new_race_clears_the_last_chart_and_result_before_it_runs(url, tmp_path):
    client = Client(url, verbose=False, download_files=str(tmp_path))
    kwargs = dict(prompt=PROMPT, thinking=False, seed=0, max_denoising_steps=6, max_new_tokens=16, api_name="/race")
    client.predict(**kwargs)
    job = client.submit(**kwargs)
    job.result(timeout=120)
    first = job.outputs()[0]
    result, chart = first[RESULT], first[CHART]
    assert result == "" and chart is None
    assert "wins" in job.outputs()[-1][RESULT] or "No winner" in job.outputs()[-1][RESULT]
