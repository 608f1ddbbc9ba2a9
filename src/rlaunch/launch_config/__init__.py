"""The launch document (`SkyRLLaunchConfig`) and what both sides of the boundary share about it:
recipe composition, role geometry, and the run's file layout."""
