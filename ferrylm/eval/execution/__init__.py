"""Running untrusted generated code: the pool of sandboxed workers (sandbox), the worker inside the sandbox
(sandbox), and the libraries HumanEval-X's Go and Rust tests import, bound into it read-only (hx_libs)."""
