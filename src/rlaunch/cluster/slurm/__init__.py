"""The Slurm backend: rlaunch jobs as Slurm jobs, through Slurm's own commands.

Imported only when chosen (`get_backend("slurm")`), so `import rlaunch` never runs a Slurm command.
"""
