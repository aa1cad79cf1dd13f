"""Pi's session model, the bottom layer: entries and their ids, the entry tree with its leaf, the
messages the model receives, token accounting, costs, and Pi JSONL files in and out.
"""
