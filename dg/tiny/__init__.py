"""The embedded DiffusionGemma-Tiny: tokenizer, synthetic skills, training and evaluation."""
