"""Provides Foya's widgets: message blocks, the message list and the prompt."""
