"""The resume check of a plan: would `--run` resume a checkpoint another runtime or run wrote?

It reads the launch document a plan renders (its runtime digest, the checkpoints it declares
compatible, the recipe's `resume_mode` and the run fingerprint of its identity view) and the
stored facts' latest checkpoint; nothing of the experiment side. The host applies the same rule
(`rlaunch.runs.resume`) to the document it is handed. A run that starts from a pinned checkpoint
(`runtime.resume_from`) resumes it while its own root holds none, once the pin checks out.
"""

from __future__ import annotations

from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.runs.resume import accepts, pinned_problem, refusal, run_fingerprint
from rlaunch.skyrl.plan.stored_facts import StoredFacts


def resume_refusal(planned: PlannedLaunch, facts: StoredFacts) -> str | None:
    """Why `--run` must be refused because of checkpoints another runtime or run wrote, or a pinned
    checkpoint (`runtime.resume_from`) it would start from is not the one pinned (None: fine); a
    relaunch resumes its latest checkpoint when the composed recipe says `resume_mode: latest`."""
    info, pin = facts.checkpoint, planned.document.runtime.resume_from
    if info is None and pin is not None:
        return pinned_problem(pin.checkpoint_root, pin.step, pin.runtime_digest)
    if info is None or get_path(planned.composed, TRAINER.RESUME_MODE) != "latest":
        return None
    document = planned.document
    runtime, fingerprint = document.runtime, run_fingerprint(document.to_dict())
    if accepts(info, runtime.source_digest, fingerprint, runtime.compatible_checkpoint_digests):
        return None
    return refusal(info, runtime.source_digest, fingerprint)
