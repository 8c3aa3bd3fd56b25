"""Stores: the operations on Redis, one module per concern.

Each store builds its key names with ``keys.py``, registers its Lua scripts
(``stores/lua``) with the transport, and offers one typed method per atomic
operation. A new feature adds a store module (and its scripts) beside these.
"""
