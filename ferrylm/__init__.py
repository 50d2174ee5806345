"""ferrylm: carry a code language model from data to a served, evaluated endpoint."""
__version__ = "0.1.0"
