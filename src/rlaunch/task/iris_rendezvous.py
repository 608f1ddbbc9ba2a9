"""The gang rendezvous on Iris: rank 0's Ray head record through Iris's endpoint registry.

Rank 0 registers the head record as an Iris endpoint of the child job (name
`rlaunch-ray-head.<job id>`, address = the GCS `host:port`, the record itself as metadata) and
re-registers it on every heartbeat (the new registration first, then the old one is dropped, so a
reader never finds none); the other ranks resolve it. Iris drops an endpoint when the attempt
that registered it ends, so a head that died leaves no record behind, and a retried rank 0
registers afresh. The outcome and the node records stay on the shared prefix
(`StorageRendezvous`): an outcome must outlive rank 0's exit, which an endpoint does not.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rlaunch.task.rendezvous import HeadRecord, StorageRendezvous

HEAD_ENDPOINT = "rlaunch-ray-head"


def head_endpoint_name(job_id: str) -> str:
    """The registry name of a job's head record (Iris namespaces endpoints by the root job)."""
    return HEAD_ENDPOINT + job_id.replace("/", ".")


class IrisEndpointRendezvous(StorageRendezvous):
    """Head records in Iris's endpoint registry; outcome and node records on the shared prefix."""

    def __init__(self, directory: str, job_id: str) -> None:
        super().__init__(directory)
        self.name = head_endpoint_name(job_id)
        self._registered: str | None = None

    @staticmethod
    def _context() -> Any:
        from iris.client.client import iris_ctx

        return iris_ctx()

    def publish_head(self, record: HeadRecord) -> None:
        registry = self._context().registry
        previous = self._registered
        self._registered = registry.register(
            self.name, record.gcs_address, metadata={"record": json.dumps(asdict(record), sort_keys=True)}
        )
        if previous is not None:
            registry.unregister(previous)

    def read_head(self) -> HeadRecord | None:
        try:
            found = self._context().resolver.resolve(self.name)
        except Exception:  # noqa: BLE001 - "not registered yet" reads differently across Iris versions
            return None
        for endpoint in found.endpoints:
            raw = endpoint.metadata.get("record")
            if raw:
                return HeadRecord.from_json(json.loads(raw))
        return None

    def describe(self) -> str:
        return f"Iris endpoint {self.name}"
