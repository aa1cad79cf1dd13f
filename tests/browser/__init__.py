"""Browser tests: a real JupyterLab and Notebook 7 in headless Chromium (see conftest.py)."""
