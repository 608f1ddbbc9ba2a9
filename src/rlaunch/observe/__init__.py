"""Read-only views of RL runs: the run list, status, the smoke verdict, logs and plots.

Modules, one job each (nothing here writes: closing a dead attempt and `rlaunch cancel` live in
`rlaunch.control`):

* `resolve`   a run reference (`name@version`, an artifact path, or a job id) -> where the run lives
* `run_files` small tolerant readers of the files a run leaves (JSON, YAML, metrics lines)
* `run_jobs`  the cluster jobs of a run, through the `Backend` protocol
* `run_list`  `rlaunch runs`: every run under a prefix, newest first
* `sweeps`    which sweep a run record says it belongs to; `rlaunch runs`' rows grouped by sweep
* `sweep_compare` `rlaunch compare --sweep`: a sweep's variants side by side
* `collect`   everything about one attempt in a typed `RunStatus` snapshot (pure reads)
* `recover`   a damaged run record's attempts rebuilt in memory from the run's other durable state
* `verdict`   the smoke criteria over a `RunStatus`
* `launch_evidence` the evidence a launch is judged against, read with `verify-smoke`'s code
* `render`    text and JSON for the above
* `plot`      reward, loss and KL against optimizer step, a sweep's reward curves (matplotlib, imported only here)
* `cli`       the `rlaunch runs|verify-smoke|logs|plot|compare` commands (`status` is in `rlaunch.control`)

Importing this package imports nothing else.
"""
