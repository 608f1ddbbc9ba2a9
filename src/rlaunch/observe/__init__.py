"""Read-only views of RL runs: the run list, status, the smoke verdict, logs, cancel and plots.

Modules, one job each:

* `resolve`  a run reference (`name@version`, an artifact path, or a job id) -> where the run lives
* `records`  small tolerant readers of the files a run leaves (JSON, YAML, metrics lines)
* `jobs`     the cluster jobs of a run, through the `Backend` protocol
* `collect`  everything about one attempt in a typed `RunStatus` snapshot (pure reads)
* `verdict`  the smoke criteria over a `RunStatus`
* `render`   text and JSON for the above
* `cancel`   the one writer here: cancel a run's jobs and record who did it, and when
* `plot`     reward, loss and KL against optimizer step (matplotlib, imported only here)
* `cli`      the `rlaunch runs|status|verify-smoke|logs|cancel|plot` commands

Importing this package imports nothing else.
"""
