"""`manage.py replay_report`: regenerate the sweep's table with its spread from the cell
files of `replay_sweep --results-dir`: between the marker lines of README.md and
docs/replay.md, and the Pareto picture (every policy, with its intervals) when matplotlib
(the `replay` extra) is installed. Runs nothing; touches no database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.replay.cells import CellError, cells_of_old_file, read_cells
from broker.replay.pareto import draw_spread
from broker.replay.spread_report import (
    END,
    START,
    between_markers,
    markdown,
    picture_link,
    rewrite_between_markers,
    summarise,
)

DEFAULT_MARKDOWN = ("README.md", "docs/replay.md")
DEFAULT_PICTURE = "docs/replay-spread.png"


def _paths(text: str) -> list[Path]:
    return [Path(p.strip()) for p in text.split(",") if p.strip()]


def _base(path: Path) -> Path:
    """A relative default is the repository's file, wherever the command runs from."""
    return path if path.is_absolute() else Path(settings.BASE_DIR) / path


def old_records(paths: list[Path]) -> list[dict[str, Any]]:
    records = []
    for path in paths:
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"--old-results: {path}: not a readable results file ({exc})") from None
        if not isinstance(results, dict) or "cells" not in results:
            raise CommandError(f"--old-results: {path}: no 'cells' (a replay_sweep --results file has them)")
        records += list(cells_of_old_file(results, half=results.get("window") or "second"))
    return records


class Command(BaseCommand):
    help = "Regenerate the replay table with its spread (README.md, docs/replay.md) and its picture."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--results-dir", default="replay-results", help="the cell files of replay_sweep --results-dir"
        )
        parser.add_argument(
            "--old-results",
            default="",
            help="comma-separated single-file results of older sweeps (replay_sweep --results), read as cells "
            "(no commit, CPU time, p50 or tenants' slowdown in them)",
        )
        parser.add_argument(
            "--markdown",
            default=",".join(DEFAULT_MARKDOWN),
            help=f"comma-separated files whose block between {START} and {END} is rewritten ('' for none)",
        )
        parser.add_argument("--png", default=DEFAULT_PICTURE, help="the Pareto picture ('' for none)")

    def handle(self, *args, **opts) -> None:
        records = self._records(opts)
        try:
            rows = summarise(records)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        pages = list(map(_base, _paths(opts["markdown"])))
        for path in pages:  # every page checked before any is written: none is left half done
            try:
                between_markers(path, "")
            except (OSError, ValueError) as exc:
                raise CommandError(f"--markdown: {exc}") from None
        picture = self._picture(rows, opts["png"])
        for path in pages:
            changed = rewrite_between_markers(path, markdown(records, picture_link(picture, path) if picture else ""))
            self.stderr.write(f"{path}: {'table rewritten' if changed else 'table unchanged'}")
        self.stdout.write(markdown(records, picture.as_posix() if picture else ""))

    def _records(self, opts: dict) -> list[dict[str, Any]]:
        records = old_records(_paths(opts["old_results"]))
        if opts["results_dir"]:
            try:
                records += read_cells(Path(opts["results_dir"]))
            except CellError as exc:
                raise CommandError(f"--results-dir: {exc}") from None
        if not records:
            raise CommandError(f"--results-dir: no cell files in {opts['results_dir']} (and no --old-results)")
        return records

    def _picture(self, rows: list, png: str) -> Path | None:
        """The picture's path once drawn; None when none is asked for or matplotlib is absent
        (a note, not an error: the tables do not need it)."""
        if not png:
            return None
        try:
            return draw_spread(rows, _base(Path(png)))
        except ImportError:
            self.stderr.write(
                "the picture needs matplotlib, which is not installed (pip install -e '.[replay]'): "
                "the tables are written without it"
            )
            return None
