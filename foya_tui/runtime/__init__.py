"""Provides Foya's headless runtime: event store, providers, context and the session loop.

Nothing under this package imports Textual, Rich or the UI (a test proves it), and LiteLLM is
imported lazily in exactly one module (`providers/litellm_client.py`).
"""
