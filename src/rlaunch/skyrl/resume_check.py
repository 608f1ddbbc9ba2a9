"""The resume check of a plan: would `--run` resume a checkpoint another runtime or run wrote?

It reads the launch document a plan renders (its runtime digest, the checkpoints it declares
compatible, the recipe's `resume_mode` and the run fingerprint of its identity view) and the
stored facts' latest checkpoint; nothing of the experiment side. The host applies the same rule
(`rlaunch.runs.resume`) to the document it is handed. A run that starts from a pinned checkpoint
(`runtime.resume_from`) resumes it while its own root holds none, once the pin checks out.
"""

from __future__ import annotations

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.resume import accepts, pinned_problem, refusal, run_fingerprint
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl.stored_facts import StoredFacts


def resumes(document: SkyRLLaunchConfig) -> bool:
    """Whether a relaunch of the document resumes its latest checkpoint (`resume_mode: latest`)."""
    composed, _ = get_profile(document.runtime.profile).compose(document.skyrl)
    return get_path(composed, "trainer.resume_mode") == "latest"


def resume_refusal(document: SkyRLLaunchConfig, facts: StoredFacts) -> str | None:
    """Why `--run` must be refused because of checkpoints another runtime or run wrote, or a pinned
    checkpoint (`runtime.resume_from`) it would start from is not the one pinned (None: fine)."""
    info, pin = facts.checkpoint, document.runtime.resume_from
    if info is None and pin is not None:
        return pinned_problem(pin.checkpoint_root, pin.step, pin.runtime_digest)
    if info is None or not resumes(document):
        return None
    runtime, fingerprint = document.runtime, run_fingerprint(document.to_dict())
    if accepts(info, runtime.source_digest, fingerprint, runtime.compatible_checkpoint_digests):
        return None
    return refusal(info, runtime.source_digest, fingerprint)
