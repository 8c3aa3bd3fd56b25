"""Workflows: signatures, chain, group and chord (``workflows``), and the compiler
that turns one into its plan and its handle at ``delay()`` (``compiler``)."""
from __future__ import annotations

from .workflows import SignedTask, Signature, TaskOptionsView, Workflow, chain, chord, group

__all__ = ["SignedTask", "Signature", "TaskOptionsView", "Workflow", "chain", "chord", "group"]
