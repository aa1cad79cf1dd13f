"""The tour in JupyterLite: a Pyodide kernel in headless chromium, nothing off loopback (issue 36)."""
