"""SkyRL 0.4.0's experiment, run with rlaunch's evidence callbacks: `run(document, mode)`.

The same steps as SkyRL's `skyrl.train.entrypoints.main_base.main` (parse the dotlist with
`SkyRLTrainConfig.from_cli_overrides`, `validate_cfg`, `initialize_ray`, train in a remote task so
the loop never runs on the head node), through SkyRL's own extension points: `BasePPOExp` builds
everything, `get_trainer` adds `callbacks=[Evidence(...)]` to the trainer's constructor and picks
the trainer class (`RayPPOTrainer`, or for the `fully_async` entrypoint, which SkyRL ships without an
entrypoint of its own, `FullyAsyncRayPPOTrainer`: it refuses callbacks, so rlaunch's subclass in
`rlaunch_skyrl.fully_async` records the same evidence), and `get_tracker` sets `WANDB_ENTITY` in the
task that creates the W&B run. Nothing in SkyRL is patched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import ray
from skyrl.train.config import SkyRLTrainConfig
from skyrl.train.entrypoints.main_base import BasePPOExp
from skyrl.train.utils import validate_cfg
from skyrl.train.utils.utils import initialize_ray

from rlaunch_skyrl.dotlist import overrides, tracker_environment
from rlaunch_skyrl.evidence import Evidence, EvidenceContext


def trainer_class(mode: str) -> type:
    if mode == "fully_async":
        from rlaunch_skyrl.fully_async import EvidenceFullyAsyncTrainer

        return EvidenceFullyAsyncTrainer
    from skyrl.train.trainer import RayPPOTrainer

    return RayPPOTrainer


def evidence_hookup(mode: str, context: EvidenceContext) -> dict[str, Any]:
    """How the trainer gets `Evidence`: as a callback, or (the fully async trainer refuses callbacks)
    as the `evidence` its rlaunch subclass feeds from its own step counter and tracker."""
    evidence = Evidence(context)
    return {"evidence": evidence} if mode == "fully_async" else {"callbacks": [evidence]}


class RlaunchExperiment(BasePPOExp):
    def __init__(self, cfg: SkyRLTrainConfig, context: EvidenceContext, mode: str, env: Mapping[str, str]) -> None:
        self.context, self.mode, self.env = context, mode, dict(env)
        super().__init__(cfg)

    def get_tracker(self):  # noqa: ANN201 - SkyRL's hook
        os.environ.update(self.env)
        return super().get_tracker()

    def get_trainer(
        self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg
    ):  # noqa: ANN001, ANN201 - SkyRL's hook signature
        return trainer_class(self.mode)(
            cfg=cfg,
            tracker=tracker,
            tokenizer=tokenizer,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            inference_engine_client=inference_engine_client,
            generator=generator,
            colocate_pg=colocate_pg,
            **evidence_hookup(self.mode, self.context),
        )


@ray.remote(num_cpus=1)
def _train(cfg: SkyRLTrainConfig, context: EvidenceContext, mode: str, env: dict[str, str]) -> None:
    RlaunchExperiment(cfg, context, mode, env).run()  # on a worker, not the head node


def config(document: Mapping[str, Any]) -> SkyRLTrainConfig:
    """SkyRL's typed config for the document, validated by SkyRL's own `validate_cfg`."""
    cfg = SkyRLTrainConfig.from_cli_overrides(overrides(document))
    validate_cfg(cfg)
    return cfg


def context_of(document: Mapping[str, Any]) -> EvidenceContext:
    trainer = document["skyrl"]["trainer"]
    return EvidenceContext(
        attempt_dir=os.environ["RLAUNCH_ATTEMPT_DIR"],
        identity=os.environ.get("RLAUNCH_MODEL_IDENTITY", ""),
        runtime_digest=os.environ["RLAUNCH_RUNTIME_DIGEST"],
        checkpoint_root=trainer["ckpt_path"],
        export_root=trainer["export_path"],
        export_hf=bool((document.get("run") or {}).get("export_hf")),
        run_fingerprint=os.environ.get("RLAUNCH_RUN_FINGERPRINT", ""),
    )


def run(document: Mapping[str, Any], mode: str) -> None:
    cfg = config(document)
    env = tracker_environment(document)
    os.environ.update(env)
    initialize_ray(cfg)
    ray.get(_train.remote(cfg, context_of(document), mode, env))
