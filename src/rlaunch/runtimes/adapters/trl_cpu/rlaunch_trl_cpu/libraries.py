"""Quiet the Hugging Face libraries (training and evaluation print only rlaunch's own lines)."""

from __future__ import annotations

import os


def quiet_libraries() -> None:
    """No progress bars, no verbosity, no Future/UserWarnings from transformers and the hub."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    except ImportError:  # pragma: no cover
        pass
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
