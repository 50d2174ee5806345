"""What every section shares: one line per error, no unknown keys."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..errors import FerryError


class ConfigError(FerryError, ValueError):
    """A config problem, worded as one line that names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)
