"""Running untrusted generated code: the pool of jailed workers (sandbox), the worker inside the jail
(jail), and the libraries HumanEval-X's Go and Rust tests import, bound into it read-only (hx_libs)."""
