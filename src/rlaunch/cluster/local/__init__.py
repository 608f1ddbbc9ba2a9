"""The embedded `local` backend: jobs are process groups on this machine, state lives on disk.

`backend.LocalBackend` checks a job against this machine (`capacity`) and starts its supervisor
detached (`job_driver`); the rest (records, status, cancel, the supervisor itself) is the gang
engine it shares with the Slurm backend (`rlaunch.cluster.gang`).
"""
