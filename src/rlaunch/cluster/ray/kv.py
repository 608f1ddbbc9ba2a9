"""Replica status in Ray's internal KV: what the Jobs API cannot hold.

The Jobs API knows a job's state, its entrypoint's exit code and its log, but nothing per
replica. The gang driver therefore publishes its record (job state and message, and per replica:
state, attempts, exit codes, node) as JSON under `ray-jobs/<job id>/state` in the cluster's
internal KV (namespace `rlaunch`, stored by the GCS), after every change. Cancel requests (who,
when, why) live next to it under `ray-jobs/<job id>/cancel`, first writer wins.

Any process that can reach the GCS reads it: every process inside the cluster (the driver passes
the GCS address to its replicas), and outside processes given the GCS address (RAY_ADDRESS or
`address=` as `host:port`, or `gcs_address=` / $RLAUNCH_RAY_GCS_ADDRESS next to a dashboard URL).
Without it the backend still answers from the Jobs API alone, with less detail per replica.

The client is `ray._raylet.GcsClient` (what Ray's own tools use; ray is pinned exactly), so a
reader does not have to become a Ray driver. Its constructor waits up to a minute for a GCS that
does not answer, so the address is probed with a plain TCP connect first.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from rlaunch.cluster.ray.contract import KV_NAMESPACE, cancel_key, dumps, rendezvous_key, state_key

CONNECT_PROBE_SECONDS = 2.0
CALL_TIMEOUT_SECONDS = 10


def split_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"GCS address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def reachable(address: str, timeout: float = CONNECT_PROBE_SECONDS) -> bool:
    try:
        host, port = split_host_port(address)
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class StatusStore:
    """Reads and writes rlaunch's records in the cluster's internal KV."""

    def __init__(self, gcs_address: str) -> None:
        from ray._raylet import GcsClient

        self.address = gcs_address
        self._client = GcsClient(address=gcs_address)

    @classmethod
    def connect(cls, gcs_address: str | None) -> StatusStore | None:
        """A store for `gcs_address`, or None when there is none or it does not answer."""
        if not gcs_address or not reachable(gcs_address):
            return None
        return cls(gcs_address)

    def _get(self, key: str) -> Any | None:
        raw = self._client.internal_kv_get(key.encode(), namespace=KV_NAMESPACE.encode(), timeout=CALL_TIMEOUT_SECONDS)
        return None if raw is None else json.loads(raw)

    def state(self, job_id: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self._get(state_key(job_id))
        return value

    def states(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        if not job_ids:
            return {}
        found = self._client.internal_kv_multi_get(
            [state_key(j).encode() for j in job_ids], namespace=KV_NAMESPACE.encode(), timeout=CALL_TIMEOUT_SECONDS
        )
        by_key = {state_key(j).encode(): j for j in job_ids}
        return {by_key[k]: json.loads(v) for k, v in found.items() if k in by_key and v is not None}

    def put_state(self, job_id: str, record: dict[str, Any]) -> None:
        self._client.internal_kv_put(
            state_key(job_id).encode(),
            dumps(record).encode(),
            True,
            namespace=KV_NAMESPACE.encode(),
            timeout=CALL_TIMEOUT_SECONDS,
        )

    def cancel_request(self, job_id: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self._get(cancel_key(job_id))
        return value

    def request_cancel(self, job_id: str, record: dict[str, Any]) -> bool:
        """Record a cancel request unless one exists (the first names who really cancelled)."""
        added = self._client.internal_kv_put(
            cancel_key(job_id).encode(),
            dumps(record).encode(),
            False,
            namespace=KV_NAMESPACE.encode(),
            timeout=CALL_TIMEOUT_SECONDS,
        )
        return bool(added)

    def put_rendezvous(self, job_id: str, address: str) -> None:
        self._client.internal_kv_put(
            rendezvous_key(job_id).encode(),
            address.encode(),
            True,
            namespace=KV_NAMESPACE.encode(),
            timeout=CALL_TIMEOUT_SECONDS,
        )

    def rendezvous(self, job_id: str) -> str | None:
        raw = self._client.internal_kv_get(
            rendezvous_key(job_id).encode(), namespace=KV_NAMESPACE.encode(), timeout=CALL_TIMEOUT_SECONDS
        )
        return None if raw is None else raw.decode()
