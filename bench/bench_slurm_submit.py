"""Submit throughput: SlurmBackend.submit against a plain loop of ``sbatch --parsable``.

    scripts/slurm-cluster up
    .venv/bin/python bench/bench_slurm_submit.py [--n 500] [--batch 10] [--transport cli|rest]

Both loops submit N held jobs (``--hold``: nothing starts, so running jobs do not skew
the numbers) of one GPU to the same account.  They alternate in batches, so a queue
that grows during the run slows both alike.  Reports jobs/s of each, their ratio
(backend / plain; target >= 0.8) and per-submit latency, then cancels every job.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.backends.base import ProjectIdentity  # noqa: E402
from broker.backends.slurm import CommandTransport, RestTransport, SlurmBackend, SlurmConfig  # noqa: E402
from broker.spec import WorkloadSpec  # noqa: E402

ENV_FILE = os.environ.get("SLURM_CI_ENV", "/run/slurm-ci/env")


def load_env(path: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            key, sep, value = line.strip().partition("=")
            if sep:
                env[key] = value
    return env


def make_backend(kind: str, account: str, workdir: str) -> SlurmBackend:
    cfg = SlurmConfig(default_account=account, submit_held=True, workdir=workdir)
    if kind == "cli":
        transport = CommandTransport(timeout_s=60)
    else:
        env = {**load_env(ENV_FILE), **{k: v for k, v in os.environ.items() if k.startswith("SLURM")}}
        token_ref = f"file:{env['SLURM_JWT_FILE']}" if env.get("SLURM_JWT_FILE") else "env:SLURM_JWT"
        transport = RestTransport(env.get("SLURMRESTD_URL", "http://127.0.0.1:6820"), token_ref,
                                  env.get("SLURM_REST_API_VERSION", "auto"),
                                  user_name=env.get("SLURM_REST_USER", "root"), timeout_s=60)
    return SlurmBackend("bench", transport, cfg)


def plain_sbatch(i: int, run: str, account: str, workdir: str) -> str:
    proc = subprocess.run(
        ["sbatch", "--parsable", "--hold", f"--account={account}", "--gres=gpu:a100:1",
         f"--job-name=plain-{run}-{i}", f"--chdir={workdir}", "--wrap", "sleep 1"],
        capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip())
    return proc.stdout.strip().split(";")[0]


def cancel_all(ids: list[str]) -> None:
    for start in range(0, len(ids), 200):
        subprocess.run(["scancel", *ids[start:start + 200]], capture_output=True, timeout=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="jobs per method (default 500)")
    ap.add_argument("--batch", type=int, default=10, help="jobs per alternating batch")
    ap.add_argument("--transport", choices=("cli", "rest"), default="cli")
    ap.add_argument("--account", default="general")
    ap.add_argument("--workdir", default="/tmp/slurm-bench")
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    run = uuid.uuid4().hex[:6]
    backend = make_backend(args.transport, args.account, args.workdir)
    identity = ProjectIdentity(tenant="bench", project="bench", slurm_account=args.account)
    spec = WorkloadSpec(project="bench", name="bench", command="sleep 1", gpus_per_worker=1,
                        gpu_models=("A100",), cpus_per_worker=1, memory_gb_per_worker=1,
                        time_limit_minutes=5)
    lat = {"backend": [], "plain": []}
    ids: list[str] = []
    done = {"backend": 0, "plain": 0}
    try:
        # warm up both paths (imports, first connection, page cache)
        ids.append(backend.submit(spec, f"wl-bench-{run}-warm", identity))
        ids.append(plain_sbatch(-1, run, args.account, args.workdir))
        while done["backend"] < args.n or done["plain"] < args.n:
            for method in ("backend", "plain"):
                count = min(args.batch, args.n - done[method])
                for _ in range(count):
                    i = done[method]
                    t0 = time.perf_counter()
                    if method == "backend":
                        ids.append(backend.submit(spec, f"wl-bench-{run}-{i}", identity))
                    else:
                        ids.append(plain_sbatch(i, run, args.account, args.workdir))
                    lat[method].append(time.perf_counter() - t0)
                    done[method] += 1
    finally:
        t0 = time.perf_counter()
        cancel_all(ids)
        cancel_s = time.perf_counter() - t0

    rate = {m: len(v) / sum(v) for m, v in lat.items()}
    print(f"transport={args.transport} n={args.n} per method, batches of {args.batch}, held jobs")
    for m in ("backend", "plain"):
        v = sorted(lat[m])
        print(f"  {m:8s} {rate[m]:7.1f} jobs/s   p50 {statistics.median(v) * 1000:6.1f} ms   "
              f"p95 {v[int(len(v) * 0.95) - 1] * 1000:6.1f} ms   total {sum(v):6.1f} s")
    ratio = rate["backend"] / rate["plain"]
    print(f"  ratio backend/plain = {ratio:.2f} (target >= 0.8) {'OK' if ratio >= 0.8 else 'BELOW TARGET'}")
    print(f"  cancelled {len(ids)} jobs in {cancel_s:.1f} s")
    return 0 if ratio >= 0.8 else 1


if __name__ == "__main__":
    sys.exit(main())
