"""The quick-start app: a few tasks and a producer that waits for their results."""
