"""A GPU name a family of several memory sizes shares is refused with the exact names, never sized
as one of them (`rlaunch.rules.devices.variants`, the rule `topology.gpu_variant_ambiguous`)."""

from __future__ import annotations

import pytest

from rlaunch.rules.devices import DEVICES, device, variants
from rlaunch.skyrl import check_plan
from tests.support.specs import recipe, topology


@pytest.mark.parametrize(
    ("name", "choices"),
    [
        ("A100", ("A100-40GB", "A100-80GB")),
        ("a100", ("A100-40GB", "A100-80GB")),  # names are matched as a topology writes them
        ("A-100", ("A100-40GB", "A100-80GB")),
        ("H20", ("H20-141GB", "H20-96GB")),
        ("A100-80GB", ()),  # exact
        ("A100-40GB", ()),
        ("H100", ()),  # H100 and H100-80GB are one size: not ambiguous
        ("L4", ()),
        ("MI300X", ()),  # unknown: not sized, not ambiguous
        ("", ()),
    ],
)
def test_a_name_is_ambiguous_only_when_it_names_no_device_and_a_family_of_several_sizes(
    name: str, choices: tuple[str, ...]
) -> None:
    assert variants(name) == choices
    assert device(name) is None or not choices


def test_every_device_name_is_exact() -> None:
    assert all(variants(d.name) == () and device(d.name) == d for d in DEVICES.values())


def test_the_preflight_refuses_an_ambiguous_gpu_with_the_exact_names() -> None:
    (found,) = [v for v in check_plan(topology(gpu_variant="A100"), recipe(), "fsdp") if v.code.startswith("topology.")]
    assert found.code == "topology.gpu_variant_ambiguous" and found.fields == ("topology.gpu_variant",)
    assert found.fix == "set topology.gpu_variant to one of A100-40GB, A100-80GB"
    assert not [v for v in check_plan(topology(gpu_variant="A100-40GB"), recipe(), "fsdp")]
