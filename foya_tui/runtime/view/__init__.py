"""Provides the view of history that the compiler and compaction both build on: valid history and
atomic tool groups, the checkpoint type and its application to history, snip and handoff state, and
the evidence ledger (SPEC H, V, C-4..C-7, K-1, K-4, K-12).

Everything here derives what the model may see from canonical history; nothing here compiles a
request (`context/`) or makes a checkpoint (`compaction/`), and nothing here imports either.
"""
