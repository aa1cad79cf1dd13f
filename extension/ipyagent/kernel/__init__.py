"""The IPython extension: ``%load_ext ipyagent``, the runtime, the ``Agent`` settings, what the
kernel records for the agent (activity, namespace), the ports its tools use, and the magics.
"""
