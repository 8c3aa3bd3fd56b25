"""The Redis layer: how minitask reaches Redis and names what it keeps there.

Connection URLs (``connection``), the transport that carries every script call
(``transport``), Redis Cluster routing (``cluster``), the embedded development
server (``embedded``), replica confirmation (``durability``) and every key name
(``keys``). Nothing here knows what a task is; the stores above give the keys
their meaning.
"""
