"""``minitask embedded``: the development broker's state, and stopping it."""
from __future__ import annotations

import argparse
from typing import Any

from ..broker import embedded
from .options import add_log_options, emit_json


def register(commands: Any) -> None:
    parser = commands.add_parser("embedded", help="status or stop of the embedded broker",
                                 description="The embedded development broker: one "
                                 "redis-server per user (per data dir), shared by every "
                                 "process that uses no other broker.")
    parser.add_argument("action", choices=("status", "stop"),
                        help="status: whether it runs, its socket and URL; stop: stop it")
    parser.add_argument("--path", default=None, help="its data dir (default: "
                        "$XDG_DATA_HOME/minitask or ~/.local/share/minitask)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_log_options(parser, level="WARNING")
    parser.set_defaults(command=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "stop":
        stopped = embedded.stop(args.path)
        where = embedded.locate(args.path).data_dir
        if args.json:
            emit_json({"stopped": stopped, "data_dir": where})
        else:
            print(f"stopped the embedded broker in {where}" if stopped else
                  f"no embedded broker runs in {where}")
        return 0
    state = embedded.status(args.path)
    report = {"running": state.running, "data_dir": state.server.data_dir,
              "socket": state.server.socket_path, "url": state.server.url, "pid": state.pid,
              "keys": state.keys}
    if args.json:
        emit_json(report)
    elif state.running:
        print(f"the embedded broker runs (pid {state.pid or '?'}), {state.keys} key(s)\n"
              f"  data dir  {state.server.data_dir}\n  socket    {state.server.socket_path}\n"
              f"  use it    MINITASK_BROKER_URL={state.server.url}, or redis-cli -s "
              f"{state.server.socket_path}\n  stop it   minitask embedded stop")
    else:
        print(f"no embedded broker runs in {state.server.data_dir}; the first process that "
              f"needs one starts it")
    return 0
