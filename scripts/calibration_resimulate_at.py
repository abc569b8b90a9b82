#!/usr/bin/env python3
"""Play a recorded calibration's simulator side with the simulator of an older commit (the
"before the fixes" rows of docs/simulator.md), against the same real runs:

    .venv/bin/python scripts/calibration_resimulate_at.py COMMIT RECORDED.json JOBS.json OUT.json

A throwaway worktree of COMMIT gets this checkout's ``broker/calibration`` (the harness did
not exist then); the one argument the harness needs from the simulator and that COMMIT's
lacked (a local job's time limit, ``inject_foreign_job(time_limit_s=...)``) is added to it;
what the harness hands a newer simulator and COMMIT's cannot take (the accounts' fair share,
a partition's MaxTime, Slurm's completing second) is left out of the copy, as COMMIT's simulator ignored them.
Nothing else of COMMIT changes, so the figures are its simulator's."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_ARG = (
    '        partition: str = "",\n    ) -> str:',
    '        partition: str = "",\n        time_limit_s: float | None = None,\n    ) -> str:',
)
LIMIT_USE = (
    "            gpu_models=(gpu_model,) if gpu_model else (),\n        )\n        with self._lock:",
    "            gpu_models=(gpu_model,) if gpu_model else (),\n            time_limit_s=time_limit_s,\n"
    "        )\n        with self._lock:",
)
RUN = """
import json, sys
from pathlib import Path
from broker.calibration.jobs import load
from broker.calibration.run import resimulate
out = resimulate(json.loads(Path(sys.argv[1]).read_text()), load(Path(sys.argv[2])))
out["resimulated_at"] = sys.argv[4]
Path(sys.argv[3]).write_text(json.dumps(out, indent=1) + "\\n")
"""


def main(commit: str, recorded: str, jobs: str, out: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True, timeout=120)
        try:
            shutil.copytree(ROOT / "broker" / "calibration", tree / "broker" / "calibration", dirs_exist_ok=True)
            _fit_harness(tree)
            cluster = tree / "broker" / "backends" / "sim" / "cluster.py"
            text = cluster.read_text()
            levers = tree / "broker" / "backends" / "sim" / "levers.py"  # where it moved later
            has_limit = levers.exists() and "time_limit_s: float | None = None," in levers.read_text()
            if "time_limit_s: float | None = None," not in text and not has_limit:
                for old, new in (LIMIT_ARG, LIMIT_USE):
                    if old not in text:
                        raise SystemExit(f"{commit}: its simulator does not read as expected ({old.strip()[:40]})")
                    text = text.replace(old, new, 1)
                cluster.write_text(text)
            short = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", commit], capture_output=True,
                                   text=True, timeout=30, check=True).stdout.strip()
            paths = [str(Path(p).resolve()) for p in (recorded, jobs, out)]
            subprocess.run([sys.executable, "-c", RUN, *paths, short], cwd=tree, env={"PYTHONPATH": str(tree)},
                           check=True, timeout=600)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], timeout=120)
    print(f"{recorded} played again by the simulator at {commit}: {out}")
    return 0


NEWER_ARGS = (
    # (what the older simulator lacks, the harness's text that hands it over, without it)
    ("broker/backends/sim/cluster.py", "share_points", "        share_points=snapshot.limits.share_points(),\n", ""),
    ("broker/backends/sim/cluster.py", "completing_s", "        completing_s=SLURM_COMPLETING_S,\n", ""),
    ("broker/backends/sim/cluster.py", "completing_s", "        completing_s=KUEUE_COMPLETING_S,\n", ""),
    ("broker/backends/sim/model.py", "max_time_s", ", max_time_s=min(times, default=None)", ""),
)


def _fit_harness(tree: Path) -> None:
    simulated = tree / "broker" / "calibration" / "simulated.py"
    text = simulated.read_text()
    for module, word, given, without in NEWER_ARGS:
        if word not in (tree / module).read_text():
            if given not in text:
                raise SystemExit(f"broker/calibration/simulated.py no longer reads as expected ({given.strip()})")
            text = text.replace(given, without)
    simulated.write_text(text)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    raise SystemExit(main(*sys.argv[1:]))
