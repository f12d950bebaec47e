"""The serving benchmark (dg.bench.serve) on the embedded model: a short load through one real replica on a
local Ray, twice, reports its figures (the median load's and each load's rate), no failed run and every run's
solo tokens; bad counts are refused in one line."""

import json

import pytest

from dg.bench import serve


def test_a_short_load_on_one_replica_reports_its_rates_and_every_run_s_solo_tokens(capsys, positive_finite):
    serve.main(["--users", "2", "--runs", "1", "--replicas", "1", "--cpus", "0.5", "--repeats", "2"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    one = result["by_replicas"]["1"]
    assert one["runs"] == 2 and one["failed"] == 0 and one["equal_to_solo"]
    assert all(positive_finite(one[k]) for k in ("runs_per_s", "tokens_per_s", "p50_s", "p95_s", "max_s"))
    assert one["p50_s"] <= one["p95_s"] <= one["max_s"]
    assert one["runs_by_replica"] == {"replica 1/1 · cpu": 2}
    assert len(one["runs_per_s_each"]) == 2 and one["runs_per_s"] == min(one["runs_per_s_each"])  # lower middle
    assert one["failed_all"] == 0 and one["equal_to_solo_all"]


def test_a_kill_without_a_second_replica_is_refused(capsys):
    with pytest.raises(SystemExit):
        serve.main(["--replicas", "1", "--kill"])
    assert "--kill needs 2 replicas" in capsys.readouterr().err
