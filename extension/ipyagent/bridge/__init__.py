"""The kernel's side of the frontend bridge (the ``ipyagent`` comm) and the headless runner.
"""
