"""Fast paths for the per-step sampling work (Triton on CUDA, torch elsewhere)."""
