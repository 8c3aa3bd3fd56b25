"""Sphinx configuration of the minitask docs (built by ``make docs``)."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import minitask  # noqa: E402

project = "minitask"
author = "the minitask authors"
copyright = "the minitask authors"
release = version = minitask.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_copybutton",
    "sphinxarg.ext",
]
# No sphinx.ext.intersphinx: the build must work offline, and it would fetch
# other projects' inventories over the network.

exclude_patterns = ["_build"]
nitpicky = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {"show-inheritance": True}
autoclass_content = "class"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"minitask {release}"
html_static_path: list = []
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
