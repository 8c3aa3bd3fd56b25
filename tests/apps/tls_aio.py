"""An asyncio app on a TLS broker given as a blocking ``redis.Redis(ssl=True, ...)``
(not a URL): TEST_TLS_PORT, TEST_TLS_CA,
TEST_TLS_CERT and TEST_TLS_KEY say where and with what."""
from __future__ import annotations

import os

import redis

from minitask import Minitask

broker = redis.Redis(host="127.0.0.1", port=int(os.environ["TEST_TLS_PORT"]), ssl=True,
                     ssl_ca_certs=os.environ["TEST_TLS_CA"],
                     ssl_certfile=os.environ["TEST_TLS_CERT"],
                     ssl_keyfile=os.environ["TEST_TLS_KEY"])
app = Minitask("tlsaio", broker=broker)


@app.task
async def double(index: int) -> int:
    return 2 * index
