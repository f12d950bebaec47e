"""The sampling step alone: GB/s of each path against the measured copy bandwidth; the cost of a step's record."""

from dg.bench.step import bench_sampling_step, bench_step_record, main


def test_sampling_step_bench_reports_gb_s_against_the_measured_bandwidth(positive_finite):
    step = bench_sampling_step("cpu", shape=(1, 16, 1000), repeats=1, bandwidth_mb=16)
    assert set(step["paths"]) == {"torch float32"} and "no CUDA" in step["note"]
    assert positive_finite(step["bandwidth_gb_s"])
    for values in step["paths"].values():
        assert all(positive_finite(values[k]) for k in ("ms", "gb_s", "fraction_of_bandwidth"))


def test_step_record_bench_times_the_sampler_s_own_record(positive_finite, capsys):
    result = bench_step_record("cpu", shape=(1, 16, 1000), repeats=2)
    assert result["shape"] == [1, 16, 1000] and result["backend"] == "torch" and positive_finite(result["record_ms"])
    main(["--record", "--device", "cpu", "--shape", "1", "8", "500", "--repeats", "1"])
    assert "record_ms" in capsys.readouterr().out
