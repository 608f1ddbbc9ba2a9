"""The embedded `local` backend: jobs are process groups on this machine, state lives on disk.

`backend.LocalBackend` submits, inspects and cancels; `supervisor` is the detached process that
owns one running job; `state` is the on-disk layout both sides share. Because everything a job
records is a file under one root, another shell (or the job itself) can list, follow and cancel
jobs after the submitting process has exited.
"""
