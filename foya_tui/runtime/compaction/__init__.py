"""Provides compaction: plan, summarise, accept and persist a checkpoint, or fail open (SPEC C, K, P).

The checkpoint type and its application to history live in `view/`, which the compiler also reads;
compaction may call the compiler (acceptance measures a candidate), never the other way round.
"""
