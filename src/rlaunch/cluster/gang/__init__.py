"""The gang engine the local and Slurm backends share: jobs as directories of state files, one supervisor each.

`engine.GangEngine` admits, records, inspects and cancels jobs; `supervisor` is the process that runs
one job's gang lifecycle (the local backend starts it detached, the Slurm backend runs it as the
batch script's driver); `state` is the on-disk layout both sides share; `procs` stops process
groups; `logs` reads a job's combined log. Because everything a job records is a file under one
root, another shell (or the job itself) can list, follow and cancel jobs after the submitter exited.
"""
