"""The views of a planned launch: the plan view, the memory table, readiness, the resume check, the gates, submission.

They read the launch document a step would launch and its stored facts, never the spec (tests/test_architecture.py).
"""
