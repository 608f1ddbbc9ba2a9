"""Gate 2's words in the plan: declared compatibility says so with both digests (never "same
runtime digest"), and a served version whose runtime changed says where its result came from."""

from __future__ import annotations

from rlaunch import storage
from rlaunch.runs.layout import CHECKPOINT_META, LATEST_MARKER, checkpoint_dir
from rlaunch.runs.resume import run_fingerprint
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl.plan.launch_document import live_run_paths
from rlaunch.skyrl.views.gate_checks import plan_rows
from rlaunch.skyrl.views.plan_view import _resume_line
from tests.support import specs as h

OLD = "0123456789abcdef" * 4


def _rows(spec, prefix: str) -> dict[str, str]:
    return dict(plan_rows(*h.planned_view(spec, prefix=prefix)))


def _resume(spec, prefix: str) -> str:
    return _resume_line(*h.planned_view_of(h.skyrl_step(spec, h.iris(), export_hf=True), prefix))


def _fingerprint(spec, prefix: str) -> str:
    return run_fingerprint(h.planned_view(spec, prefix=prefix)[0].to_dict())


def _attempt(spec, prefix: str, state: str, digest: str = OLD) -> None:
    paths = live_run_paths(spec, prefix)
    update_attempt(paths.output_path, "run", "a1", {"state": state, "runtime_digest": digest})


def _checkpoint(spec, prefix: str, digest: str = OLD) -> None:
    root = live_run_paths(spec, prefix).checkpoint_root
    storage.write_text_atomic(storage.join(root, LATEST_MARKER), "2")
    meta = {"runtime_digest": digest, "run_fingerprint": _fingerprint(spec, prefix)}
    storage.write_json_atomic(storage.join(checkpoint_dir(root, 2), CHECKPOINT_META), meta)


def test_declared_compatibility_is_named_with_both_digests(prefix: str) -> None:
    spec = h.spec(compatible_checkpoint_digests=(OLD,))
    _attempt(spec, prefix, "failed")
    _checkpoint(spec, prefix)
    rows = _rows(spec, prefix)
    assert rows["version"].startswith("compatible by declaration")
    assert OLD[:16] in rows["version"] and spec.runtime.source_digest[:16] in rows["version"]
    resume = _resume(spec, prefix)
    assert resume.startswith("would resume step 2, compatible by declaration")
    assert OLD[:16] in resume and spec.runtime.source_digest[:16] in resume
    assert "same run fingerprint" not in resume


def test_without_the_declaration_the_version_is_refused(prefix: str) -> None:
    spec = h.spec()
    _attempt(spec, prefix, "failed")
    version = _rows(spec, prefix)["version"]
    assert version.startswith("REFUSED") and f"compatible_checkpoint_digests=({OLD!r},)" in version


def test_a_served_version_says_its_result_came_from_the_old_runtime(prefix: str) -> None:
    spec = h.spec()
    _attempt(spec, prefix, "succeeded")
    storage.write_json_atomic(live_run_paths(spec, prefix).terminal_manifest_uri, {"state": "succeeded"})
    version = _rows(spec, prefix)["version"]
    assert version.startswith("served from storage: the stored result came from the old runtime")
    assert OLD[:16] in version and spec.runtime.source_digest[:16] in version


def test_same_runtime_says_so(prefix: str) -> None:
    spec = h.spec()
    _attempt(spec, prefix, "succeeded", digest=spec.runtime.source_digest)
    _checkpoint(spec, prefix, digest=spec.runtime.source_digest)
    assert _rows(spec, prefix)["version"] == "1 recorded attempt(s), all under this runtime"
    resume = _resume(spec, prefix)
    assert resume == (
        f"would resume step 2 (same run fingerprint {_fingerprint(spec, prefix)[:16]} and runtime digest "
        f"{spec.runtime.source_digest[:16]})"
    )
