"""Runnable minitask examples; run them from the repository root (see README.rst)."""
