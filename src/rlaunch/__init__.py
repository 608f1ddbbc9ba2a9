"""rlaunch: launch RL post-training runs from a versioned artifact graph.

Importing this package stays cheap: it never imports torch, ray, transformers, trl, vllm or
skyrl, and the heavy parts of rlaunch itself load only when used.
"""

__version__ = "0.1.0"
