"""Recording the Lua script calls an app makes, round trip by round trip."""
from __future__ import annotations

from typing import Any, List, Tuple

from minitask import Minitask


def record_script_calls(app: Minitask) -> List[List[Tuple[str, Any]]]:
    """Every round trip of script calls (``Transport.run_calls``) ``app`` makes from
    now on, each as its calls' (script name, reply)."""
    made: List[List[Tuple[str, Any]]] = []
    transport = app.broker.transport
    run_calls = transport.run_calls

    def recording(calls: Any, *args: Any, **kwargs: Any) -> Any:
        replies = run_calls(calls, *args, **kwargs)
        made.append([(call[0], reply) for call, reply in zip(calls, replies)])
        return replies

    transport.run_calls = recording  # type: ignore[method-assign]
    return made


def script_names(made: List[List[Tuple[str, Any]]]) -> List[List[str]]:
    """``record_script_calls``'s round trips, by script name only."""
    return [[name for name, _ in trip] for trip in made]
