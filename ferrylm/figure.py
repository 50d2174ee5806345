"""A matplotlib figure as an inline PNG: how the eval and bench reports embed their plots."""

from __future__ import annotations

import base64
import io


def pyplot():
    """matplotlib's pyplot on the Agg backend: every report draws off-screen, with or without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig) -> str:
    """The figure as base64 PNG for an inline <img>, then closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()
