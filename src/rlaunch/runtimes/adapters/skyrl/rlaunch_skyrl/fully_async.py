"""SkyRL 0.4.0's fully async trainer, with the evidence its synchronous sibling gets from callbacks.

`FullyAsyncRayPPOTrainer` takes no callbacks: its constructor raises NotImplementedError when
given any, and its `train()` fires none. So `Evidence` is not handed to it as a callback; it is
fed from the points the fully async loop does call, with the trainer's own step counter:

* start  `init_weight_sync_state()`, called once by `train()` right after the checkpoint is loaded,
         so `global_step` is the step a resume starts from (0 for a fresh run)
* step   the tracker's `log(...)`: a training step's metrics carry `trainer/global_step`, logged
         once per optimizer step (train_batch_size == policy_mini_batch_size is SkyRL's rule here);
         each committing log follows that step's checkpoint save, so it mirrors the checkpoints
* end    `train()` returning: `global_step` names the final HF export, as SkyRL's `save_models` did

One correction: the loop advances `global_step` past the last step it trained before its final
(safety-net) save and before the save of an epoch that ran dry mid-step, so SkyRL 0.4.0 writes the
state after N steps as `global_step_<N+1>` there (its in-loop saves, and the synchronous trainer's
final one, name the steps trained; resuming that checkpoint would skip a step). Such a save is made
under the step it holds, so the latest checkpoint is the last step trained.

Nothing in SkyRL is patched: the trainer is subclassed and its tracker wrapped.
"""

from __future__ import annotations

from typing import Any

from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer

from rlaunch_skyrl.evidence import Evidence


class EvidenceTracker:
    """SkyRL's tracker, telling `Evidence` what it logs; everything else is the tracker's own."""

    def __init__(self, tracker: Any, evidence: Evidence) -> None:
        self.tracker, self.evidence = tracker, evidence

    def log(self, data: dict[str, Any], step: int, commit: bool = False) -> None:
        self.tracker.log(data, step=step, commit=commit)
        self.evidence.logged(data)
        if commit:
            self.evidence.saved()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracker, name)


class EvidenceFullyAsyncTrainer(FullyAsyncRayPPOTrainer):
    """`FullyAsyncRayPPOTrainer` recording `Evidence` (see the module docstring)."""

    def __init__(self, *args: Any, evidence: Evidence, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.evidence = evidence
        self.tracker = EvidenceTracker(self.tracker, evidence)

    def init_weight_sync_state(self) -> None:
        self.evidence.started(self.cfg, self.global_step)
        super().init_weight_sync_state()

    def save_checkpoints(self) -> str:
        if self.global_step != self.evidence.last_step + 1:
            return super().save_checkpoints()
        self.global_step -= 1  # the step being worked on was not trained: save what the last one left
        try:
            return super().save_checkpoints()
        finally:
            self.global_step += 1

    async def train(self) -> None:
        await super().train()
        self.evidence.ended(self.global_step)
