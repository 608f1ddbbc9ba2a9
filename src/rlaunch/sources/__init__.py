"""Models and data as inputs of a run: artifact sources, Hugging Face snapshots, and the facts recorded of them.

The I/O of the inputs lives here (hub snapshots, data files' facts, a model's `config.json`), below the RL model.
"""
