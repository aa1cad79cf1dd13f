"""The built-in tools, one module each (``python``, ``read``, ``bash``, ``write``/``edit``, the
searches, ``recall``, ``notebook``); the machinery they share is the folder above."""
