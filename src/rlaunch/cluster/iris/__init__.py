"""The Iris backend: rlaunch jobs on Marin's cluster system (PyPI `marin-iris`, Python >= 3.12).

Imported only when chosen (`get_backend("iris")`), so `import rlaunch` never loads Iris.
"""

# Iris priority bands (`IrisSkyRLExecution.priority`); None inherits (INTERACTIVE for a root job).
PRIORITIES = ("production", "interactive", "batch", "system")
