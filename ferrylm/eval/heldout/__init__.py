"""The held-out repositories' examples scored per example: understanding and generation (examples,
smooth_bleu, explain_replies), the loss per example (loss), and the base shown a few examples (few_shot)."""
