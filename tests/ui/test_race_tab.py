"""The Race tab through the real server: three lanes (diffusion, AR, hybrid), each with its own ✓/✗, and one result
line; a slowed race shows its lanes in the order they ran; a separate AR model given with --ar-model races through
generate() while hybrid stays on the diffusion model's weights; a new race first clears the last one's chart and
result."""

import re

from gradio_client import Client

from dg.examples import SkillExamples
from dg.loading import load_ar_model
from dg.ui.app import serve

PROMPT = "What is 12 + 30?"
CHART, RESULT = 13, 14  # outputs of /race: three lanes (mark, canvas, stats, text), status, chart, result, picker
MARKS, STATUS = (0, 4, 8), 12
FORWARDS = re.compile(r"\| forward passes \| (\d+) \|")
WALL = re.compile(r"\| wall \(s\) \| ([\d.]+) \|")
RACE_TIME = re.compile(r"racing… ([\d.]+) s into the race · slow motion, 2× slower")


def test_each_lane_marks_its_own_answer_and_a_slowed_race_shows_the_lanes_end_in_the_order_they_ran(url, tmp_path):
    example = SkillExamples.load().race_example()
    client = Client(url, verbose=False, download_files=str(tmp_path))
    job = client.submit(prompt=example.prompt, thinking=example.thinking, seed=0, slow_motion=2, api_name="/race")
    final = job.result(timeout=300)
    frames = job.outputs()
    verdict = re.search(r"Reference answer `(\d+)`: diffusion (.), AR (.), hybrid (.)\.", final[RESULT])
    assert verdict and verdict.group(1) == example.answer, final[RESULT]
    for mark, sign in zip(MARKS, verdict.groups()[1:]):  # each lane's own mark says what the result line says
        assert final[mark] == f"**{sign} {'right' if sign == '✓' else 'wrong'}** · reference answer `{example.answer}`"
    walls = [float(WALL.search(final[mark + 2]).group(1)) for mark in MARKS]
    shown = [next(i for i, frame in enumerate(frames) if frame[mark]) for mark in MARKS]  # a lane's mark appears
    for (wall_a, shown_a), (wall_b, shown_b) in zip(sorted(zip(walls, shown)), sorted(zip(walls, shown))[1:]):
        assert shown_a <= shown_b, (walls, shown)  # when the race time reaches its end, in the order they ran
    times = [float(m.group(1)) for frame in frames if (m := RACE_TIME.match(str(frame[STATUS])))]
    assert len(set(times)) >= 10 and times == sorted(times) and times[-1] <= max(walls), times
    assert final[STATUS] == "finished · slow motion, 2× slower"


def test_the_app_races_a_separate_ar_model_given_with_ar_model_and_hybrid_on_the_diffusion_weights(loaded,
                                                                                                     ar_model_dir,
                                                                                                     tmp_path):
    with serve(loaded, load_ar_model(str(ar_model_dir))) as url:
        client = Client(url, verbose=False, download_files=str(tmp_path))
        out = client.predict(prompt=PROMPT, thinking=False, seed=0, max_denoising_steps=6, max_new_tokens=16,
                             api_name="/race")
    d_stats, a_stats, h_stats = out[2], out[6], out[10]
    assert all(int(FORWARDS.search(stats).group(1)) > 0 for stats in (d_stats, a_stats, h_stats))
    assert "AR ·" in "".join(out[5]) and "verify rounds" in h_stats
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
