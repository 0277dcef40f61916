"""MkDocs hooks. (The reference tables are in the committed pages: docs/generate.py.)

- ``changelog.md`` is the repository's CHANGELOG.md (links into ``docs/`` made relative).
- The nav's ``Records`` section lists every page of ``docs/records/``, sorted by name
  (``index.md`` first): a new record needs no edit of mkdocs.yml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def on_config(config: Any) -> Any:
    records = sorted(
        (p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs/records").glob("*.md")),
        key=lambda page: (not page.endswith("/index.md"), page),
    )
    for item in config.nav or []:
        if isinstance(item, dict) and "Records" in item:
            item["Records"] = records
    return config


def on_files(files: Files, config: Any) -> Files:
    text = (ROOT / "CHANGELOG.md").read_text()
    files.append(File.generated(config, "changelog.md", content=text.replace("](docs/", "](")))
    return files
