"""Pi-style context compaction over a session: where to cut, what to summarise and how (the
prompts, the transcript, the summariser interface), the artifact ledger and branch summaries.
"""
