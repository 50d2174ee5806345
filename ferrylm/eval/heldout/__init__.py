"""The held-out repositories' examples scored per example: understanding and generation (examples,
smooth_bleu; the summary read by ../replies/summary.py), the loss per example (loss), and the base shown a few examples (few_shot)."""
