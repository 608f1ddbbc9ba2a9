"""The experiments' own reward functions: shipped with a run as `ExperimentCode(modules=("experiments.rewards",))`
and called by the trainer in the runtime's environment (docs/experiment_code.md)."""
