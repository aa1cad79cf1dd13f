"""The agent: the loop (``loop.py``) and what a run takes from outside (``ports.py``), its settings,
events, budget and summariser, what the model is told (``prompt/``), the tools (``tools/``), replay
and the probes of summary quality (``probe/``)."""
