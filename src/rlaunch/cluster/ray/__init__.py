"""The `ray` backend: rlaunch jobs on an existing Ray cluster through the Ray Jobs API.

Ray is an optional extra (`pip install 'rlaunch[ray]'`); only `backend`, `gang`, `tasks`,
`capacity`, `kv` and `logs` import it, and only when the backend is chosen. The modules:

  backend   `RayBackend`: submit/status/wait/logs/cancel/list through `JobSubmissionClient`
  gang      `python -m rlaunch.cluster.ray.job_driver -- ARGV`: the entrypoint of every rlaunch job on Ray;
            it places the gang, runs the replicas, retries, enforces the timeout, watches the parent
  tasks     the remote task that runs one replica attempt inside a placement-group bundle
  replica   one replica attempt as a local process tree (no Ray import)
  keeper    `python -m rlaunch.cluster.ray.keeper`: process-group leader of one attempt (stdlib only)
  capacity  reachability and resource fit, checked before anything is submitted
  kv        replica status in Ray's internal KV (the GCS), readable from any process that reaches it
  logs      reading and following a job's log through the Jobs API
  common    names shared by all of the above
"""
