"""Provides Foya's screens, each with a `.tcss` file beside it."""
