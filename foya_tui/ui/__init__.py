"""Provides Foya's Textual user interface; everything that touches the runtime goes through `bridge`."""
