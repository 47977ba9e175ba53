"""Sphinx configuration of pysframe's documentation.

Sphinx, because pysframe's docstrings are written in reStructuredText (``:class:``,
``:func:``, ``:mod:`` roles) and autodoc reads them as they are; MyST lets the pages themselves
be Markdown, the README's language.  Build with warnings as errors:

    sphinx-build -W --keep-going -b html docs docs/_build/html
    sphinx-build -W --keep-going -b linkcheck docs docs/_build/linkcheck
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The sources, so that a build from a clone documents this tree (an installed pysframe is
# not needed).
sys.path.insert(0, str(ROOT / "src"))

import pysframe  # noqa: E402

project = "pysframe"
author = "the pysframe authors"
copyright = "the pysframe authors; GNU General Public License, version 3 or later"
version = release = pysframe.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# MyST: heading anchors for links such as [dump](commands/reading.md#where-sframe-comes-from).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

# Autodoc: the public API as the docstrings say it, in source order.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "alabaster"
html_title = f"pysframe {release}"
html_static_path: list[str] = []

# linkcheck: every internal reference and anchor is checked by the build itself (-W fails on
# a broken one); external links are checked only where the network is there
# (PYSFRAME_DOCS_LINKCHECK_EXTERNAL=1), so that CI without network still builds.
import os  # noqa: E402

if not os.environ.get("PYSFRAME_DOCS_LINKCHECK_EXTERNAL"):
    linkcheck_ignore = [r"https?://.*"]
linkcheck_anchors = True
