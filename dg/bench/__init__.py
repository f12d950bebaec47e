"""Benchmarks, kept out of tests/: the model benchmark, the sampling step, the device check, the UI, the report.

    python -m dg.bench [--device-check]     # models.py, step.py, device.py → report.py
    python -m dg.bench.ui [--browser]       # the app's first frame, frame rate and overhead
"""
