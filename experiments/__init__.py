"""Experiments: Python modules whose Click `main` returns the terminal artifact steps."""
