"""SkyRL 0.4.0 ships its fully-async trainer but no entrypoint for it (only an example script), so
this driver builds the standard experiment with `FullyAsyncRayPPOTrainer` in place of the
synchronous trainer. Arguments: the same dotlist as `main_base`."""

from __future__ import annotations

import sys

import ray
from skyrl.train.config import SkyRLTrainConfig
from skyrl.train.entrypoints.main_base import BasePPOExp
from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer
from skyrl.train.utils import validate_cfg
from skyrl.train.utils.utils import initialize_ray


class FullyAsyncExperiment(BasePPOExp):
    def get_trainer(
        self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg
    ):  # noqa: ANN001, ANN201, PLR0913 - SkyRL's hook signature
        return FullyAsyncRayPPOTrainer(
            cfg=cfg,
            tracker=tracker,
            tokenizer=tokenizer,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            inference_engine_client=inference_engine_client,
            generator=generator,
            colocate_pg=colocate_pg,
        )


@ray.remote(num_cpus=1)
def _train(cfg: SkyRLTrainConfig) -> None:
    FullyAsyncExperiment(cfg).run()  # on a worker, not the head node


def main() -> None:
    cfg = SkyRLTrainConfig.from_cli_overrides(sys.argv[1:])
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(_train.remote(cfg))


if __name__ == "__main__":
    main()
