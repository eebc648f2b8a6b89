"""Provides fakes for tests: a loopback OpenAI-compatible server."""
