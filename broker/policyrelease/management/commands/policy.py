"""`manage.py policy export|import|seed`: policy versions to and from files (version control).

manage.py policy export [--number N] [--out FILE]   the active version (or version N)
manage.py policy export --all --out DIR             every version as vNNNN-<hash>.yaml
manage.py policy import FILE [--summary TEXT]       a new draft version
manage.py policy seed                               the first version from GPUBROKER_POLICY_FILE
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.policyrelease.models import PolicyRelease
from broker.policyrelease.selectors import release_for_export
from broker.policyrelease.services.releases import release_import, release_seed_from_file
from broker.policyrelease.validation import PolicyInvalid


class Command(BaseCommand):
    help = "Move policy versions to and from files."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="write a version (default: the active one)")
        export.add_argument("--number", type=int, default=None)
        export.add_argument("--all", action="store_true", help="every version into --out (a folder)")
        export.add_argument("--out", default="", help="file (or folder with --all); default: stdout")
        imp = sub.add_parser("import", help="store a file as a new draft version")
        imp.add_argument("file")
        imp.add_argument("--summary", default="")
        sub.add_parser("seed", help="the first version from GPUBROKER_POLICY_FILE (no-op once any exists)")

    def handle(self, *args, **opts) -> None:
        getattr(self, f"_{opts['action']}")(opts)

    def _export(self, opts: dict) -> None:
        if opts["all"]:
            if not opts["out"]:
                raise CommandError("--all needs --out FOLDER")
            folder = Path(opts["out"])
            folder.mkdir(parents=True, exist_ok=True)
            for each in PolicyRelease.objects.order_by("number"):
                (folder / f"v{each.number:04d}-{each.version}.yaml").write_text(each.content, encoding="utf-8")
            self.stdout.write(f"wrote {PolicyRelease.objects.count()} versions to {folder}")
            return
        release = release_for_export(number=opts["number"])
        if release is None:
            raise CommandError(f"no policy version {opts['number']}" if opts["number"] else "no active policy version")
        if opts["out"]:
            Path(opts["out"]).write_text(release.content, encoding="utf-8")
            self.stdout.write(f"v{release.number} ({release.version}, {release.state}) -> {opts['out']}")
        else:
            self.stdout.write(release.content, ending="")

    def _import(self, opts: dict) -> None:
        try:
            text = Path(opts["file"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{opts['file']}: {exc}") from None
        try:
            release = release_import(actor=None, content=text, source=opts["file"], summary=opts["summary"])
        except PolicyInvalid as exc:
            raise CommandError(f"{opts['file']}: {exc}") from None
        self.stdout.write(f"v{release.number} ({release.version}) stored as a draft; propose it in /policy/")

    def _seed(self, opts: dict) -> None:
        try:
            release = release_seed_from_file()
        except (OSError, PolicyInvalid) as exc:
            raise CommandError(f"GPUBROKER_POLICY_FILE: {exc}") from None
        self.stdout.write(f"v{release.number} ({release.version}) {release.state}")
