"""Running pytest as a project would, with minitask's plugin loaded once."""
from __future__ import annotations

import importlib.metadata
from typing import List


def plugin_is_installed() -> bool:
    """Whether pytest loads the plugin by itself: the package was installed with its
    ``pytest11`` entry point (as ``make test`` does). Loading it twice is an error."""
    return any(entry.value == "minitask.pytest_plugin"
               for entry in importlib.metadata.entry_points(group="pytest11"))


def plugin_options() -> List[str]:
    """The options that load the plugin when its entry point does not."""
    return [] if plugin_is_installed() else ["-p", "minitask.pytest_plugin"]
