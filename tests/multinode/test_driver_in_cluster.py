"""On the Ray backend a Ray-driver runtime's child job is its driver alone; elsewhere, the whole gang."""

from __future__ import annotations

from pathlib import Path

from rlaunch.host.allocate import child_job_spec, driver_job_spec, drives_existing_cluster
from rlaunch.launch_config import schema
from tests.support.documents import rendered_document


def document(tmp_path: Path, backend: str, profile: str = "fsdp") -> schema.SkyRLLaunchConfig:
    data = rendered_document(str(tmp_path))
    data["cluster"]["backend"] = backend
    data["runtime"]["profile"] = profile
    return schema.from_dict(data)


def test_a_ray_driver_runtime_on_ray_submits_only_its_driver(tmp_path: Path) -> None:
    doc = document(tmp_path, "ray")
    gang = child_job_spec(doc, "file:///doc.yaml", working_dir=None)
    assert drives_existing_cluster(doc)
    assert gang.replicas == 8 and gang.resources.accelerators == 8  # what the capacity check asks for
    driver = driver_job_spec(gang)
    assert driver.replicas == 1
    assert driver.resources.accelerators == 0 and driver.resources.cpu == 1.0  # no GPU held from the trainer
    assert driver.argv == gang.argv and driver.env == gang.env
    assert driver.labels["rlaunch.gang"] == "ray-driver-in-cluster"


def test_other_backends_and_runtimes_keep_the_whole_gang(tmp_path: Path) -> None:
    assert not drives_existing_cluster(document(tmp_path, "local"))
    assert not drives_existing_cluster(document(tmp_path, "iris"))
    assert not drives_existing_cluster(document(tmp_path, "ray", profile="trl-cpu"))
