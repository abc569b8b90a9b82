"""CommandTransport: Slurm's own commands, locally or through a prefix such as ssh.

Every command is an argument list run with ``subprocess.run(list, timeout=...)``; no
local shell is involved.  With an ssh prefix the remote side does run a shell, so each
argument is quoted with ``shlex.quote`` (``remote_shell``).  Times are asked for as
epoch seconds (``SLURM_TIME_FORMAT=%s``), so no time zone guessing is needed.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import subprocess
import tempfile
import threading
from datetime import datetime, timezone
from typing import Iterable, Iterator, Sequence

from broker.cluster_report import NodeLevels
from broker.backends.base import Rejected, Unavailable
from broker.backends.slurm import parsers
from broker.backends.slurm.topology_levels import parse_topology
from broker.backends.slurm.mapping import SubmitRequest, sbatch_args
from broker.backends.slurm.outcome import SlurmEnd, parse_sacct_ends, sacct_end_args
from broker.backends.slurm.transport import Association, SlurmAcct, SlurmJob, SlurmNode

log = logging.getLogger(__name__)

TIME_ENV = ("SLURM_TIME_FORMAT", "%s")
_INVALID_JOB = "invalid job id specified"
_ALREADY_DONE = ("already completing or completed", "job has already finished")


def _kill_group(proc: subprocess.Popen, wait: bool = True) -> None:
    """SIGKILL the command's process group (it runs in a group of its own)."""
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    if wait:
        try:
            proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass


def since_arg(since: datetime | None, now: datetime | None = None) -> str:
    """sacct -S value independent of the Slurm host's time zone: ``now-<N>seconds``."""
    if since is None:
        return "now-1days"
    if since.tzinfo is None:
        since = since.astimezone()
    now = now or datetime.now(timezone.utc)
    seconds = math.ceil((now - since).total_seconds()) + 1
    return f"now-{seconds}seconds" if seconds > 0 else "now"


class CommandTransport:
    """Runs sbatch/squeue/scontrol/sacct/scancel/sacctmgr.

    ``prefix``: e.g. ``["ssh", "-o", "BatchMode=yes", "login1"]`` or ``["sudo", "-u",
    "svc"]``; empty runs locally.  ``remote_shell``: quote the arguments for a remote
    shell (default: when the prefix starts with ssh).  ``bin_dir``: where the Slurm
    commands live, if not on PATH."""

    name = "cli"

    def __init__(
        self,
        prefix: Sequence[str] = (),
        timeout_s: float = 30.0,
        *,
        remote_shell: bool | None = None,
        bin_dir: str = "",
        stream_timeout_s: float | None = None,
    ):
        self.prefix = list(prefix)
        self.timeout_s = timeout_s
        self.stream_timeout_s = stream_timeout_s or max(timeout_s, 120.0)
        if remote_shell is None:
            remote_shell = bool(self.prefix) and os.path.basename(self.prefix[0]) == "ssh"
        self.remote_shell = remote_shell
        self.bin_dir = bin_dir

    # ------------------------------------------------------------ plumbing
    def argv(self, cmd: Sequence[str]) -> list[str]:
        """The full argument list for one Slurm command."""
        cmd = list(cmd)
        if self.bin_dir:
            cmd[0] = os.path.join(self.bin_dir, cmd[0])
        if not self.prefix:
            return cmd
        cmd = ["env", f"{TIME_ENV[0]}={TIME_ENV[1]}", *cmd]
        if self.remote_shell:
            return [*self.prefix, " ".join(shlex.quote(a) for a in cmd)]
        return [*self.prefix, *cmd]

    def _env(self) -> dict[str, str] | None:
        if self.prefix:
            return None
        env = dict(os.environ)
        env[TIME_ENV[0]] = TIME_ENV[1]
        return env

    def run(
        self, cmd: Sequence[str], *, input: str | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run; raise Unavailable when it cannot start or runs out of time.  The command
        gets its own process group, so a timeout also ends whatever it started."""
        argv = self.argv(cmd)
        timeout = timeout or self.timeout_s
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self._env(),
                process_group=0,
            )
        except OSError as exc:
            raise Unavailable(f"cannot run {argv[0]}: {exc}") from exc
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise Unavailable(f"{cmd[0]} timed out after {timeout}s") from exc
        except BaseException:
            _kill_group(proc)
            raise
        result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if self.prefix and os.path.basename(self.prefix[0]) == "ssh" and result.returncode == 255:
            raise Unavailable(f"ssh failed: {result.stderr.strip()}")
        return result

    def query(self, cmd: Sequence[str], *, empty_ok: Iterable[str] = ()) -> str:
        """Run a read-only command; its stdout, or Unavailable.  A failure whose stderr
        contains one of ``empty_ok`` means "nothing found" and gives ""."""
        proc = self.run(cmd)
        if proc.returncode != 0:
            err = proc.stderr.strip()
            if any(s in err.lower() for s in empty_ok):
                return ""
            raise Unavailable(f"{cmd[0]} failed (rc={proc.returncode}): {err or proc.stdout.strip()}")
        return proc.stdout

    def stream(self, cmd: Sequence[str], timeout: float | None = None) -> Iterator[str]:
        """Yield stdout lines as they come; Unavailable on timeout or failure (possibly
        after some lines were yielded)."""
        argv = self.argv(cmd)
        timeout = timeout or self.stream_timeout_s
        with tempfile.TemporaryFile(mode="w+") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    env=self._env(),
                    process_group=0,
                )
            except OSError as exc:
                raise Unavailable(f"cannot run {argv[0]}: {exc}") from exc
            expired = threading.Event()

            def kill() -> None:
                expired.set()
                _kill_group(proc, wait=False)

            timer = threading.Timer(timeout, kill)
            timer.daemon = True
            timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    yield line
                rc = proc.wait()
            finally:
                timer.cancel()
                if proc.poll() is None:  # the consumer stopped early
                    _kill_group(proc)
                if proc.stdout:
                    proc.stdout.close()
            if expired.is_set():
                raise Unavailable(f"{cmd[0]} timed out after {timeout}s")
            if rc != 0:
                err.seek(0)
                raise Unavailable(f"{cmd[0]} failed (rc={rc}): {err.read().strip()}")

    # ------------------------------------------------------------ Transport
    def submit(self, request: SubmitRequest) -> str:
        proc = self.run(["sbatch", *sbatch_args(request)], input=request.script)
        out, err = proc.stdout.strip(), proc.stderr.strip()
        if proc.returncode != 0:
            text = err or out
            if parsers.is_transient(text) or not text:
                raise Unavailable(f"sbatch: {text or 'failed rc=%d' % proc.returncode}")
            raise Rejected(parsers.slurm_error_message(text) or text, raw=text)
        job_id = out.splitlines()[-1].split(";")[0].strip() if out else ""
        if not job_id.isdigit():
            raise Unavailable(f"sbatch printed no job id: {out!r} {err!r}")
        return job_id

    def jobs(
        self,
        *,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        states: Iterable[str] | None = None,
    ) -> list[SlurmJob]:
        if job_ids is not None and not job_ids:
            return []
        cmd = ["squeue", "--noheader", "--all", f"--Format={parsers.squeue_format()}"]
        states = list(states or ())
        cmd.append("--states=" + (",".join(states) if states else "all"))
        if job_ids:
            cmd.append("--jobs=" + ",".join(str(j) for j in job_ids))
        if names:
            cmd.append("--name=" + ",".join(names))
        # squeue fails with "Invalid job id specified" when none of the ids is known
        out = self.query(cmd, empty_ok=(_INVALID_JOB,))
        return parsers.parse_squeue(out)

    def nodes(self) -> list[SlurmNode]:
        out = self.query(["scontrol", "--details", "--oneliner", "show", "node"])
        return parsers.parse_scontrol_nodes(out)

    def topology(self) -> NodeLevels:
        return parse_topology(self.query(["scontrol", "show", "topology"]))

    def sacct_cmd(
        self,
        *,
        since: datetime | None = None,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        every_run: bool = False,
    ) -> list[str]:
        cmd = [
            "sacct",
            "--allusers",
            "--parsable2",
            "--allocations",
            "--noheader",
            f"--delimiter={parsers.US}",
            "--format=" + ",".join(parsers.SACCT_FIELDS),
        ]
        if every_run:
            cmd.append("--duplicates")
        if job_ids:
            cmd.append("--jobs=" + ",".join(str(j) for j in job_ids))
            if since is not None:
                cmd.append("--starttime=" + since_arg(since))
        else:
            cmd.append("--starttime=" + since_arg(since))
        if names:
            cmd.append("--name=" + ",".join(names))
        return cmd

    def accounting(
        self,
        *,
        since: datetime | None = None,
        job_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        every_run: bool = False,
    ) -> Iterator[SlurmAcct]:
        if job_ids is not None and not job_ids:
            return iter(())
        cmd = self.sacct_cmd(since=since, job_ids=job_ids, names=names, every_run=every_run)
        return parsers.iter_sacct(self.stream(cmd))

    def cancel(self, job_id: str) -> None:
        proc = self.run(["scancel", str(job_id)])
        if proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip()
            low = err.lower()
            if _INVALID_JOB in low or any(s in low for s in _ALREADY_DONE):
                return
            raise Unavailable(f"scancel {job_id} failed (rc={proc.returncode}): {err}")

    def job_ends(self, job_ids: Sequence[str]) -> dict[str, SlurmEnd]:
        """State, exit code and reason of ended jobs, from slurmdbd (sacct)."""
        if not job_ids:
            return {}
        out = self.query(["sacct", *sacct_end_args(), "--jobs=" + ",".join(str(j) for j in job_ids)])
        return parse_sacct_ends(out.splitlines())

    def associations(self, account: str) -> list[Association]:
        out = self.query(
            [
                "sacctmgr",
                "--noheader",
                "--parsable2",
                "show",
                "associations",
                "where",
                f"account={account}",
                "format=cluster,account,user",
            ]
        )
        rows = []
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) >= 3 and parts[1]:
                rows.append(Association(account=parts[1], user=parts[2], cluster=parts[0]))
        return rows

    def add_account(
        self,
        account: str,
        users: Sequence[str] = (),
        *,
        cluster: str = "",
        description: str = "",
        organization: str = "",
    ) -> None:
        where = [f"cluster={cluster}"] if cluster else []
        if not [a for a in self.associations(account) if not a.user]:
            cmd = [
                "sacctmgr",
                "--immediate",
                "add",
                "account",
                account,
                f"Description={description or account}",
                f"Organization={organization or account}",
            ]
            cmd += [w.capitalize() for w in where]
            self._admin(cmd)
        have = {a.user for a in self.associations(account)}
        for user in users:
            if user not in have:
                cmd = ["sacctmgr", "--immediate", "add", "user", user, f"Account={account}"]
                cmd += [w.capitalize() for w in where]
                self._admin(cmd)

    def _admin(self, cmd: list[str]) -> None:
        proc = self.run(cmd)
        text = (proc.stderr + proc.stdout).strip()
        if proc.returncode != 0 and "nothing new added" not in text.lower():
            if parsers.is_transient(text):
                raise Unavailable(f"{' '.join(cmd[:4])}: {text}")
            raise Rejected(f"{' '.join(cmd[:4])} refused: {text}", raw=text)
