"""Prompt templates and directives: markdown shipped in the top-level `prompts/` folder (installed as the
package `rockmem_mcp.prompts`), each overridable by a same-named file in the data home's `prompts/` folder.

A template names the values it takes as `{{name}}`; rendering replaces them in one pass, so a value that
itself contains `{{…}}` (a user's message, say) is never expanded. Overrides are read on every use, so an
edit takes effect on the next call without a restart.
"""

from __future__ import annotations

import logging
import re
from importlib.resources import files
from pathlib import Path

from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.storage.no_follow import read_bytes

log = logging.getLogger(__name__)

MAX_TEMPLATE_BYTES = 256_000  # an override larger than this is ignored (with a warning)
_NAME = re.compile(r"[a-z][a-z0-9-]{0,63}")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


class Templates:
    def __init__(self, override_dir: Path) -> None:
        self.override_dir = override_dir
        self._shipped = files("rockmem_mcp.prompts")
        self._warned: set[tuple[str, float]] = set()

    def names(self) -> list[str]:
        """The shipped templates (an override can only replace one of these)."""
        return sorted(p.name[:-3] for p in self._shipped.iterdir() if p.name.endswith(".md") and p.name != "README.md")

    def text(self, name: str) -> str:
        """The template's markdown: the data home's override if it is usable, else the shipped file."""
        if not _NAME.fullmatch(name) or name not in self.names():
            raise NotFoundError(f"no prompt template {name!r}; templates: {', '.join(self.names())}")
        return self._override(name) or self._shipped.joinpath(f"{name}.md").read_text(encoding="utf-8")

    def render(self, name: str, **values: str) -> str:
        """The template with each `{{key}}` replaced by `values[key]`; unknown placeholders stay as written."""
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.text(name))

    def _override(self, name: str) -> str | None:
        path = self.override_dir / f"{name}.md"
        try:
            stat = path.lstat()
        except OSError:
            return None
        try:
            if stat.st_size > MAX_TEMPLATE_BYTES:
                raise ValueError(f"it is larger than {MAX_TEMPLATE_BYTES:,} bytes")
            return read_bytes(path).decode("utf-8")  # a link is refused: nothing is read from outside the home
        except (OSError, ValueError) as exc:
            if (name, stat.st_mtime) not in self._warned:
                self._warned.add((name, stat.st_mtime))
                log.warning("ignoring the prompt override %s (%s); using the shipped template", path, exc)
            return None
