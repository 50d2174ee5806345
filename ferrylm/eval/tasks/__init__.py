"""Executed code benchmarks: the seam each goes through (benchmark), HumanEval and HumanEval-X, how a
brace-language reply becomes a completion (../replies/), and scoring a file of samples (score)."""
