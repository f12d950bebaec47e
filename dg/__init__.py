"""dg — watch DiffusionGemma denoise its canvas. `python -m dg --help` lists the commands."""
