"""`python -m rlaunch.host --config URL`: the launch host without the `rlaunch` command around it.

What an RL step starts (see `rlaunch.skyrl.plan.launcher`): the same command as `rlaunch launch`, but
it skips the admin command's package (the experiment decorators and the artifact runner), which
the host never uses.
"""

from rlaunch.host.cli import launch

launch(prog_name="rlaunch launch")
