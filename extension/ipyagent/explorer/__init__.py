"""The compaction explorer: the plan it draws, the HTML view and the widget.
"""
