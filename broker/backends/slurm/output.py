"""A Slurm job's output file: where it is, and reading part of it with one bounded command.

Every job writes to a path the broker can name: ``output`` (an sbatch ``--output``
pattern), else ``<output_dir>/slurm-%j.out``, else Slurm's own default ``slurm-%j.out``
in the job's working directory.  The file is read where the jobs run, through a
CommandTransport (the cluster's own for the command transport; for slurmrestd, which
serves no files, one built from ``logs_prefix`` / ``logs_ssh_host``).  One ``awk`` reads
it: bounded by the transport's timeout, by the number of lines asked for and by the
length of each line, so a runaway file never reaches the broker whole.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from broker.backends.base import LogPage, LogsGone, Unavailable
from broker.backends.slurm.config import SlurmConfig

if TYPE_CHECKING:  # pragma: no cover - commands imports mapping, which imports this module
    from broker.backends.slurm.commands import CommandTransport

DEFAULT_NAME = "slurm-%j.out"
LINE_MAX = 4000  # characters of one line that are shown; the rest is cut
_PATTERN_RE = re.compile(r"%(.)")
# the pattern letters the broker can resolve without asking Slurm (job id, name, array master)
RESOLVABLE = frozenset({"j", "x", "A", "%"})

# the last n lines, first the number of lines in the file (so the tail knows its offset)
_TAIL = (
    "{ buf[NR % n] = substr($0, 1, w) } "
    "END { print NR; s = NR - n + 1; if (s < 1) s = 1; for (i = s; i <= NR; i++) print buf[i % n] }"
)
# lines a+1 .. a+b, then a last line saying whether more follow
_PAGE = (
    "NR > a && NR <= a + b { print substr($0, 1, w); next } "
    'NR > a + b { more = 1; exit } END { print (more ? "more" : "end") }'
)


def output_pattern(config: SlurmConfig) -> str:
    """What ``--output`` / ``standard_output`` is set to ("" leaves Slurm's default)."""
    if config.output:
        return config.output
    if config.output_dir:
        return posixpath.join(config.output_dir, DEFAULT_NAME)
    return ""


def check_pattern(pattern: str) -> None:
    """A pattern the broker could not resolve to one file per job is a config error."""
    unknown = sorted({m for m in _PATTERN_RE.findall(pattern) if m not in RESOLVABLE})
    if unknown:
        raise ValueError(
            f"output pattern {pattern!r} uses %{', %'.join(unknown)}; the broker can resolve only %j, %x, %A and %%"
        )


def output_path(config: SlurmConfig, job_id: str, workload_id: str, *, rest: bool = False) -> str:
    """The file a job writes to.  Relative paths are the job's working directory's: the
    workdir, else where sbatch ran (the transport's own place; slurmrestd uses /tmp)."""
    pattern = output_pattern(config) or DEFAULT_NAME
    workdir = config.workdir or ("/tmp" if rest else "")
    values = {"j": job_id, "A": job_id, "x": workload_id, "%": "%"}
    path = _PATTERN_RE.sub(lambda m: values.get(m.group(1), m.group(0)), pattern)
    return path if posixpath.isabs(path) or not workdir else posixpath.join(workdir, path)


class OutputReader:
    def __init__(self, runner: "CommandTransport"):
        self.runner = runner

    def read(self, path: str, *, offset: int | None, limit: int, tail: int | None) -> LogPage:
        if tail is not None:
            lines = self._awk(["-v", f"n={tail}", "-v", f"w={LINE_MAX}", _TAIL], path)
            total = int(lines[0]) if lines and lines[0].isdigit() else 0
            kept = lines[1:] if total else []
            return LogPage(lines=tuple(kept), offset=max(0, total - len(kept)))
        start = offset or 0
        lines = self._awk(["-v", f"a={start}", "-v", f"b={limit}", "-v", f"w={LINE_MAX}", _PAGE], path)
        more = bool(lines) and lines[-1] == "more"
        return LogPage(lines=tuple(lines[:-1]), offset=start, more=more)

    def _awk(self, program: list[str], path: str) -> list[str]:
        # "./": an operand such as a=b.out would be an awk assignment, not a file
        target = path if path.startswith("/") else "./" + path
        proc = self.runner.run(["awk", *program[:-1], "--", program[-1], target])
        if proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip()
            if "no such file" in err.lower() or "cannot open" in err.lower():
                raise LogsGone(f"the output file {path} is not there")
            raise Unavailable(f"reading {path} failed (rc={proc.returncode}): {err[:300]}")
        return proc.stdout.splitlines()
