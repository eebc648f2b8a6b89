"""Provides the context compiler: each request built before its model call, its budget, the incremental
per-session index it reads, and the typed report it gives the faces (SPEC X, B, T)."""
