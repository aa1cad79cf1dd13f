"""The notebook as the session store: the metadata schema, checking what comes from outside,
``.ipynb`` files, journal outputs, hydration from disk, and persistence.
"""
