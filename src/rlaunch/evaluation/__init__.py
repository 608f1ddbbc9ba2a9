"""Evaluation as a library step: a model scored on a data split by a named verifiable reward.

from rlaunch.evaluation import Sampling, evaluation_step
"""

from rlaunch.evaluation.eval_step import EvalReport, Sampling, evaluation_step

__all__ = ["EvalReport", "Sampling", "evaluation_step"]
