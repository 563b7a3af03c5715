"""MkDocs hook: import the packages from the source tree being documented, not from an installed copy.

The API pages are read from the sources next to ``mkdocs.yml``; the CLI page and the derived signatures import
the packages at build time. Putting the tree first on ``sys.path`` makes both describe the same code, whether or
not (or whichever version of) the package is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def on_config(config: Any) -> Any:
    """Put the directory of ``mkdocs.yml`` first on ``sys.path`` (MkDocs event)."""
    root = str(Path(config.config_file_path).resolve().parent)
    if sys.path[:1] != [root]:
        sys.path.insert(0, root)
    return config
