"""The records of a run: where its files live (`layout`), its run record, resume, the rehearsal report.

Below the launch document (whose run paths are a `layout.RunPaths`): it imports only the ground floor.
"""
