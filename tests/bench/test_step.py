"""The sampling step alone: GB/s of each path against the measured copy bandwidth."""

from dg.bench.step import bench_sampling_step


def test_sampling_step_bench_reports_gb_s_against_the_measured_bandwidth(positive_finite):
    step = bench_sampling_step("cpu", shape=(1, 16, 1000), repeats=1, bandwidth_mb=16)
    assert set(step["paths"]) == {"torch float32"} and "no CUDA" in step["note"]
    assert positive_finite(step["bandwidth_gb_s"])
    for values in step["paths"].values():
        assert all(positive_finite(values[k]) for k in ("ms", "gb_s", "fraction_of_bandwidth"))
