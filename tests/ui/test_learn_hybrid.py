"""Learn's verify round through the real server: its button runs the race's three-term sum in hybrid mode, shows
each round as it is verified at the Generate tab's Pace, then picks the run, which reads as one round in four
pictures (the browser test looks at them)."""

import re

from gradio_client import Client

from dg.examples import SkillExamples

PICKER, TITLE = 0, 1  # outputs of /hybrid_round: the run picker, the round's title, its pictures, its numbers
LIVE_ROUND = re.compile(r"verify round (\d+), live \(canvas \d+\)")


def test_the_verify_round_button_runs_the_example_in_hybrid_mode_and_picks_it(url, tmp_path):
    client = Client(url, verbose=False, download_files=str(tmp_path))
    picked = client.predict(api_name="/hybrid_round")[PICKER]
    label = picked["value"] if isinstance(picked, dict) else picked
    assert " hybrid " in label and SkillExamples.load().race_example().prompt[:20] in label


def test_at_a_pace_the_button_shows_the_rounds_one_after_another_as_they_are_verified(url, tmp_path):
    client = Client(url, verbose=False, download_files=str(tmp_path))
    job = client.submit(pace_ms=40, api_name="/hybrid_round")
    job.result(timeout=180)
    rounds = [int(m.group(1)) for frame in job.outputs() if (m := LIVE_ROUND.search(str(frame[TITLE])))]
    assert len(set(rounds)) >= 3 and rounds == sorted(rounds), rounds  # round after round, never back
    assert any("drafting the first round" in str(frame[TITLE]) for frame in job.outputs())
