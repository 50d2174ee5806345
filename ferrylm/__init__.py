"""ferrylm: carry a code language model from data to a served, evaluated endpoint."""

__version__ = "0.1.0"

import logging as _logging

# bitsandbytes (the qlora extra) warns at import on every CPU with AVX-512 bf16 that an optional
# kernel package is absent, then falls back to its own kernels; peft imports it everywhere.
_logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(_logging.ERROR)
