"""Provides routes, the model catalog, provider error classification and provider clients."""
