"""Learn's verify round through the real server: its button runs the race's three-term sum in hybrid mode and
picks the run, which then reads as one round in four pictures (the browser test looks at them)."""

from gradio_client import Client

from dg.examples import SkillExamples


def test_the_verify_round_button_runs_the_example_in_hybrid_mode_and_picks_it(url, tmp_path):
    client = Client(url, verbose=False, download_files=str(tmp_path))
    picked = client.predict(api_name="/hybrid_round")
    label = picked["value"] if isinstance(picked, dict) else picked
    assert " hybrid " in label and SkillExamples.load().race_example().prompt[:20] in label
