"""A reply lost as the server closed the connection says what Redis does to a reply
over its client-output-buffer-limit (probe35 M1): a task of a huge message had every
fetch cut so, and the worker said only "lost Redis ... is Redis running and
reachable?", which sent the operator to the network. Other lost replies, and errors
before the command was sent, say no such thing."""
from __future__ import annotations

import redis

from minitask.broker.refusals import broker_error


def test_a_reply_closed_by_the_server_names_the_output_buffer_limit() -> None:
    error = broker_error(redis.ConnectionError("Connection closed by server."),
                         "fetch from queue 'default'", "redis://localhost:1/0", sent=True)
    said = str(error)
    assert "client-output-buffer-limit" in said and error.sent
    assert "Connection closed by server: the connection failed after" in said  # no ".:"


def test_other_lost_replies_do_not() -> None:
    reset = broker_error(redis.ConnectionError("Error 104 while reading: Connection reset"),
                         "fetch from queue 'default'", "redis://localhost:1/0", sent=True)
    unsent = broker_error(redis.ConnectionError("Connection closed by server."),
                          "fetch from queue 'default'", "redis://localhost:1/0")
    assert "client-output-buffer-limit" not in str(reset)
    assert "client-output-buffer-limit" not in str(unsent)
