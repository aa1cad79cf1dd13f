"""The kernel's side of the agent's ports: running code as a cell, the notebook port, describing
the namespace's values, and recording the notebook's activity."""
