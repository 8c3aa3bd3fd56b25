"""Stores: the operations on Redis, one module per concern.

Each store builds its key names with ``broker.keys``, registers its Lua scripts
(``stores/lua``) with the transport, and offers one typed method per atomic
operation. A new feature adds a store module (and its scripts) beside these.
``broker`` gathers every store of one app over one transport; ``aio`` is the
async twin of the calls producers make.
"""
