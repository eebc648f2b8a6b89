"""Provides compaction: plans, checkpoints, summaries, acceptance and their persistence (SPEC C, P)."""
