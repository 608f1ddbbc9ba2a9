"""A real Slurm for the tests: munged, slurmctld and two slurmd (nodes n1, n2) on this machine.

`start(directory)` installs the Debian packages when they are missing and this runs as root
(`apt-get install slurmctld slurmd slurm-client munge`), writes a key, `slurm.conf` and
`gres.conf` under `directory`, starts the daemons on free loopback ports and waits until both
nodes are idle; anything that prevents that is a `SlurmUnavailable` with one line saying why.
`stop` scancels what is left and terminates the daemons by the PIDs they recorded.
`restart_slurmctld` stops slurmctld by its PID and starts it again (a fault test's scheduler restart);
`node_state`/`restore_node` read a node's state and bring a node a test set down back to idle.

The cluster:
  nodes      n1, n2: NodeHostname=localhost, NodeAddr 127.0.0.1 and 127.0.0.2, each its own slurmd
             port; 4 CPUs (declared, over what the machine has: SlurmdParameters=config_overrides), 2 logical GPUs each
             (gres `gpu`, files that are /dev/null twins made with mknod: the gpu plugin drops
             file-less GPUs and refuses regular files)
  debug      both nodes, the default partition, MaxTime 60 min
  small      n1 only, MaxTime 5 min, AllowAccounts=physics (the queue check tests' partition)
No slurmdbd (it needs a database): `sacct` is unavailable and finished jobs stay in
`scontrol show job` for MinJobAge seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rlaunch.waiting import WaitTimeout, wait_until
from tests.support.live_clusters import free_ports
from tests.support.polling import pid_alive

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch")
INSTALL_TIMEOUT = 600.0
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
NODES = ("n1", "n2")
CPUS_PER_NODE = 4
GPUS_PER_NODE = 2

CONFIG = """\
ClusterName=rlaunchtest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=1
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
"""
NODE = "NodeName={name} NodeHostname=localhost NodeAddr={address} Port={port} CPUs={cpus} RealMemory=16000 Gres=gpu:{gpus} State=UNKNOWN\n"
PARTITIONS = """\
PartitionName=debug Nodes={nodes} Default=YES MaxTime=60 State=UP
PartitionName=small Nodes={first} MaxTime=5 State=UP AllowAccounts=physics
"""


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be started here; the message is the one line the tier skips with."""


@dataclass(frozen=True)
class SlurmCluster:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        """What a client needs: SLURM_CONF."""
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *argv: str, timeout: float = 30.0) -> str:
        done = subprocess.run(
            argv, env={**os.environ, **self.env()}, capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout


def _missing_programs() -> list[str]:
    return [p for p in DAEMONS if shutil.which(p) is None]


def install() -> None:
    """apt-get the packages when a daemon is missing (root only); SlurmUnavailable when that cannot be done."""
    missing = _missing_programs()
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise SlurmUnavailable(
            f"Slurm is not installed ({', '.join(missing)} missing) and this is not root with apt-get: "
            f"install {' '.join(PACKAGES)} to run the slurm tier"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
    ):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{' '.join(argv)} took over {INSTALL_TIMEOUT:g}s") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SlurmUnavailable(f"{' '.join(argv[:3])} failed ({done.returncode}): {tail[0]}")
    if _missing_programs():
        raise SlurmUnavailable(f"apt-get installed {' '.join(PACKAGES)} but {_missing_programs()} are still missing")


def _write_config(root: Path) -> None:
    for sub in ("munge", "state", "run", "log", "dev", *(f"spool/{n}" for n in NODES)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o755)  # munged refuses a socket directory others cannot traverse
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for index in range(GPUS_PER_NODE):
        device = root / "dev" / f"gpu{index}"
        os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a character device like /dev/null
    ctld_port, slurmd_port, *node_ports = free_ports(2 + len(NODES))
    text = CONFIG.format(root=root, ctld_port=ctld_port, slurmd_port=slurmd_port)
    for index, (name, port) in enumerate(zip(NODES, node_ports, strict=True)):
        address = f"127.0.0.{index + 1}"  # each node its own loopback address, as Ray nodes need
        text += NODE.format(name=name, address=address, port=port, cpus=CPUS_PER_NODE, gpus=GPUS_PER_NODE)
    text += PARTITIONS.format(nodes=",".join(NODES), first=NODES[0])
    (root / "slurm.conf").write_text(text)
    (root / "gres.conf").write_text(f"Name=gpu File={root}/dev/gpu[0-{GPUS_PER_NODE - 1}]\n")


def _log_tail(root: Path) -> str:
    lines = []
    for log in sorted((root / "log").glob("*.log")):
        errors = [line for line in log.read_text(errors="replace").splitlines() if "error" in line.lower()]
        if errors:
            lines.append(f"{log.name}: {errors[-1]}")
    return "; ".join(lines) or "no errors logged"


def _run_daemon(argv: list[str], root: Path) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT, env={**os.environ})
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SlurmUnavailable(f"{argv[0]} did not start ({done.returncode}): {said} [{_log_tail(root)}]")


def start(root: Path) -> SlurmCluster:
    """Install if needed, configure and start the daemons; return once both nodes are idle."""
    if not os.uname().sysname == "Linux":
        raise SlurmUnavailable("the slurm tier starts Slurm daemons, which needs Linux")
    install()
    if os.geteuid() != 0:
        raise SlurmUnavailable("the slurm tier runs slurmd as root (SlurmdUser=root): run it as root")
    try:
        _write_config(root)
    except OSError as exc:  # mknod refused (an unprivileged container), a full disk
        raise SlurmUnavailable(f"cannot write the test cluster's files under {root}: {exc}") from None
    cluster = SlurmCluster(root)
    conf = str(cluster.conf)
    munge = root / "munge"
    try:
        _run_daemon(
            [
                "munged", "--force", f"--socket={munge}/munge.socket", f"--key-file={munge}/munge.key",
                f"--pid-file={root}/run/munged.pid", f"--log-file={root}/log/munged.log", f"--seed-file={munge}/seed",
            ],
            root,
        )  # fmt: skip
        _run_daemon(["slurmctld", "-f", conf], root)
        for name in NODES:
            _run_daemon(["slurmd", "-f", conf, "-N", name], root)
    except SlurmUnavailable:
        stop(cluster)  # what did start is stopped again
        raise
    seen: list[str] = []

    def idle() -> bool:
        try:
            seen[:] = cluster.command("sinfo", "-h", "-N", "-o", "%N %t").split()
        except (RuntimeError, subprocess.TimeoutExpired):
            seen[:] = []
        return {seen[i] for i in range(0, len(seen) - 1, 2) if seen[i + 1] == "idle"} >= set(NODES)

    try:
        wait_until(idle, START_TIMEOUT, "both Slurm nodes to be idle", interval=0.5)
    except WaitTimeout:
        stop(cluster)
        raise SlurmUnavailable(
            f"Slurm's nodes were not idle {START_TIMEOUT:g}s after start (sinfo: {' '.join(seen) or 'no answer'}) "
            f"[{_log_tail(root)}]"
        ) from None
    return cluster


def _pids(root: Path) -> list[int]:
    pids = []
    for pid_file in sorted((root / "run").glob("*.pid")):
        with contextlib.suppress(ValueError, OSError):
            pids.append(int(pid_file.read_text().strip()))
    return pids


def stop(cluster: SlurmCluster) -> list[int]:
    """Cancel every job, then stop the daemons by PID; returns the PIDs still alive after the wait."""
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, WaitTimeout):
        cluster.command("scancel", "--user=root", timeout=10)
        empty = lambda: not cluster.command("squeue", "-h", "-o", "%i", timeout=10).strip()  # noqa: E731
        wait_until(empty, STOP_TIMEOUT, "the test cluster's jobs to end", interval=0.5)
    pids = _pids(cluster.root)
    ordered = [*pids[1:], *pids[:1]]  # munged.pid sorts first; stop it last
    for pid in ordered:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not any(pid_alive(p) for p in pids), STOP_TIMEOUT, "the Slurm daemons to exit", interval=0.2)
    left = [p for p in pids if pid_alive(p)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def slurmctld_pid(cluster: SlurmCluster) -> int | None:
    """The running slurmctld's PID (None when it is not running)."""
    with contextlib.suppress(ValueError, OSError):
        pid = int((cluster.root / "run" / "slurmctld.pid").read_text().strip())
        return pid if pid_alive(pid) else None
    return None


def _answers(cluster: SlurmCluster) -> bool:
    try:
        return "is UP" in cluster.command("scontrol", "ping", timeout=10)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False


def start_slurmctld(cluster: SlurmCluster) -> None:
    """Start slurmctld as `start` does (it recovers its jobs from StateSaveLocation); return once it answers."""
    _run_daemon(["slurmctld", "-f", str(cluster.conf)], cluster.root)
    wait_until(lambda: _answers(cluster), START_TIMEOUT, "slurmctld to answer again", interval=0.2)


def restart_slurmctld(cluster: SlurmCluster, down_for: float) -> None:
    """Stop slurmctld by its PID (SIGTERM: it saves its state), leave it down `down_for` seconds, start it again."""
    pid = slurmctld_pid(cluster)
    if pid is None:
        raise RuntimeError("slurmctld is not running: nothing to restart")
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not pid_alive(pid), STOP_TIMEOUT, "slurmctld to exit", interval=0.1)
    time.sleep(down_for)
    start_slurmctld(cluster)


def node_state(cluster: SlurmCluster, node: str) -> str:
    """The node's state as sinfo writes it (idle, mix, alloc, down, down*, drain, ...)."""
    return cluster.command("sinfo", "-h", "-N", "-n", node, "-o", "%t").split()[0]


def restore_node(cluster: SlurmCluster, node: str) -> None:
    """Bring back a node a test set down (ReturnToService=1 keeps it down, as a site keeps a node
    an operator set down, until it is resumed) and wait until it takes jobs again."""

    def usable() -> bool:
        state = node_state(cluster, node)
        if state.startswith(("down", "drain", "fail")):
            with contextlib.suppress(RuntimeError):
                cluster.command("scontrol", "update", f"nodename={node}", "state=resume")
            return False
        return state.rstrip("*~#") in ("idle", "mix", "alloc")

    wait_until(usable, START_TIMEOUT, f"node {node} to take jobs again", interval=0.5)


def steps_left(cluster: SlurmCluster, job_id: str) -> list[str]:
    """The steps of job `job_id` a slurmd of this cluster launched and whose step daemon has not
    ended yet (its log's `launch task StepId=J.S` without `[J.S] done with job`): a node Slurm set
    down keeps its step daemon until the step's processes are gone and slurmctld was told."""
    left = []
    for log in sorted((cluster.root / "log").glob("slurmd-*.log")):
        text = log.read_text(errors="replace")
        for step in re.findall(rf"launch task StepId=({re.escape(job_id)}\.\d+) ", text):
            if f"[{step}] done with job" not in text:
                left.append(f"{step} on {log.stem.removeprefix('slurmd-')}")
    return left
