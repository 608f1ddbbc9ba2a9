"""The RL configuration model as pure values: spec, role plan, topology, runtime, retention, executions.

Building any of them checks its own fields and reads nothing; planning (`rlaunch.skyrl.plan`) reads storage.
"""
