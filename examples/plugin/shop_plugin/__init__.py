"""A plugin adding tasks to the ``shop`` app of examples/orders, through an entry point."""
