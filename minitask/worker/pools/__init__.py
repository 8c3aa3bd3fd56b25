"""Where a worker runs its tasks: threads, child processes, or one event loop.

``threads`` and ``processes`` take leased jobs from the worker's dispatcher;
``coroutines`` runs ``async def`` tasks on an event loop of its own. ``job``
says what every pool needs of a leased task.
"""
