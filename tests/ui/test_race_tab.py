"""The Race tab through the real server: three lanes (diffusion, AR, hybrid) and one result line; a separate AR
model given with --ar-model races through generate() while hybrid stays on the diffusion model's weights; a new
race first clears the last one's chart and result."""

import re

from gradio_client import Client

from dg.loading import load_ar_model
from dg.ui.app import serve

PROMPT = "What is 12 + 30?"
CHART, RESULT = 10, 11  # outputs of /race: three lanes (canvas, stats, text), status, chart, result, picker
FORWARDS = re.compile(r"\| forward passes \| (\d+) \|")


def test_the_app_races_a_separate_ar_model_given_with_ar_model_and_hybrid_on_the_diffusion_weights(loaded,
                                                                                                     ar_model_dir,
                                                                                                     tmp_path):
    with serve(loaded, load_ar_model(str(ar_model_dir))) as url:
        client = Client(url, verbose=False, download_files=str(tmp_path))
        out = client.predict(prompt=PROMPT, thinking=False, seed=0, max_denoising_steps=6, max_new_tokens=16,
                             api_name="/race")
    d_stats, a_stats, h_stats = out[1], out[4], out[7]
    assert all(int(FORWARDS.search(stats).group(1)) > 0 for stats in (d_stats, a_stats, h_stats))
    assert "AR ·" in "".join(out[3]) and "verify rounds" in h_stats
    assert "Speed (effective tok/s): diffusion" in out[RESULT] and "hybrid" in out[RESULT]


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
