"""Provides the context compiler's parts: token counting, budget and projection."""
