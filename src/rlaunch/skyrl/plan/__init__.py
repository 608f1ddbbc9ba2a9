"""Planning and launching an RL step: its stored facts, the launch document, the preflight over them, the step.

Above the values (`rlaunch.skyrl.values`) and the preflight; the plan's views (`rlaunch.skyrl.views`) read what it plans.
"""
