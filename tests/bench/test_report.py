"""The benchmark's plotly report."""

from dg.bench.report import write_report


def test_report_is_written_for_a_device_check_result(tmp_path):
    result = {"device_check": {
        "device": "GPU", "prefill_ms": 10.0, "ar": {"tps": 5.0, "ms_per_token": 200.0},
        "diffusion": [{"backend": "torch", "tps": 50.0, "ms_per_step": 20.0}]}}
    assert "Device check on GPU" in write_report(result, tmp_path / "r.html").read_text()
