"""What a run shows in the notebook: the untrusted-text gate, the streamed reply and tool blocks,
the budget widget, the approval question.
"""
