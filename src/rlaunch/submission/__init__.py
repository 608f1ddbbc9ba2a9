"""A submission is a value: what `--run` would submit, planned, judged and checked before anything is sent.

    prepare(handles, invocation, given) -> Submission
        plans the graph (which steps build, which are served from storage), judges every step that
        launches over the evidence storage holds (`rlaunch.judgement.judge` for RL steps,
        `judge_step_job` for step jobs), checks capacity against the backend, and renders the
        coordinator's job spec. It reads storage, the environment and the backend; it writes nothing.
    submit(submission) -> Submitted
        records the smoke gates a reason let go, then submits the coordinator (refused while the
        submission refuses).

The dry run prints `judgement(...)`, the function `prepare` judges with, so the plan and `--run`
say the same words, and the launch host judges the document it is handed with the same `judge`.
The Click layer (`rlaunch.cli.rl_options`) parses options into these values and prints what comes back.
"""

from rlaunch.submission.authorised import Given
from rlaunch.submission.invocation import Invocation
from rlaunch.submission.submission import Submission, Submitted, judgement, prepare, submit

__all__ = ["Given", "Invocation", "Submission", "Submitted", "judgement", "prepare", "submit"]
