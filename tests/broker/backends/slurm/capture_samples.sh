#!/usr/bin/env bash
# Capture the real outputs of the running test cluster (scripts/slurm-cluster up) into
# fixtures/<major.minor>/ for the per-version parser tests:
#
#   tests/broker/backends/slurm/capture_samples.sh            # -> fixtures/22.05/, 24.11/ or 26.05/
#   tests/broker/backends/slurm/capture_samples.sh limits     # the limit replies only, no jobs
#   tests/broker/backends/slurm/capture_samples.sh metrics    # 25.11+: /metrics/nodes, one job running
#
# It submits a few short jobs (one completed with a workload id as comment, one cancelled,
# one running on two nodes, one pending on the gpu-small QoS limit, one held), captures
# scontrol/squeue/sinfo/sacct (text and --json) and the REST replies of every API version
# the server offers, then cancels what is left.  Run as root with the Slurm commands on PATH.
set -euo pipefail
cd "$(dirname "$0")"
ENV_FILE=${SLURM_CI_ENV:-/run/slurm-ci/env}
# shellcheck disable=SC1090
set -a; . "$ENV_FILE"; set +a
VERSION=$(sinfo --version | awk '{print $2}')
OUT=fixtures/$(cut -d. -f1,2 <<<"$VERSION")
mkdir -p "$OUT"
JOBDIR=${SLURM_TEST_JOBDIR:-/tmp/slurm-ci-jobs}
mkdir -p "$JOBDIR"
REPO=$(cd ../../../.. && pwd)
PY=$REPO/.venv/bin/python
US=$'\x1f'

sb() { sbatch --parsable --chdir="$JOBDIR" --mem=256M "$@" | cut -d';' -f1; }
rest() { curl -s --max-time 10 -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $SLURM_JWT" "$SLURMRESTD_URL$1"; }
# the OpenAPI document escapes slashes ("\/slurm\/v0.0.38\/...")
apis() {
  rest /openapi/v3 | grep -oE '/slurm\\?/v0\.0\.[0-9]+\\?/' | grep -oE 'v0\.0\.[0-9]+' \
    | awk -F. -v min="$(cd "$REPO" && "$PY" -c 'from broker.backends.slurm import rest; print(rest.SUPPORTED_MIN)')" \
        '$3 >= min' | sort -t. -k3,3n -u
}
limits() {  # the QoS, association and partition limits as every offered REST API gives them
  for api in $(apis); do
    rest "/slurmdb/$api/qos" >"$OUT/rest-$api-qos.json"
    # the cluster's own accounts only: the tests' throw-away accounts would make it 100 KB
    rest "/slurmdb/$api/associations" | "$PY" -c 'import json, sys
d = json.load(sys.stdin)
keep = {"root", "general", "research", "fs-heavy", "fs-light"}
d["associations"] = [a for a in d["associations"] if a["account"] in keep]
json.dump(d, sys.stdout, indent=2)' >"$OUT/rest-$api-associations.json"
    rest "/slurm/$api/partitions" >"$OUT/rest-$api-partitions.json"
  done
}
if [[ ${1:-} == metrics ]]; then  # capture_samples.sh metrics: 25.11+'s OpenMetrics, a job running
  job=$(sbatch --parsable --chdir="${SLURM_TEST_JOBDIR:-/tmp}" --mem=256M --account=general -w n1 \
    --gres=gpu:a100:3 -J ext-capture-metrics --wrap 'sleep 60' | cut -d';' -f1)
  trap 'scancel "$job" 2>/dev/null || true' EXIT
  for _ in $(seq 1 40); do [[ $(squeue -h -j "$job" -o %T) == RUNNING ]] && break; sleep 0.5; done
  curl -sf --max-time 10 "http://127.0.0.1:6817/metrics/nodes" >"$OUT/metrics-nodes.txt"
  echo "captured Slurm $VERSION /metrics/nodes with job $job (3 GPUs on n1) running into $OUT"
  exit 0
fi
if [[ ${1:-} == limits ]]; then  # capture_samples.sh limits: these replies only, no jobs
  limits
  echo "captured Slurm $VERSION limits (REST $(apis | paste -sd' ')) into $OUT"
  exit 0
fi

done_job=$(sb --account=general --gres=gpu:a100:2 -J wl-capture-done --comment=wl-capture-done --wrap 'sleep 1')
cancel_job=$(sb --account=general --gres=gpu:a100:1 -J ext-capture-cancel --begin=now+3600 --wrap 'sleep 1')
scancel "$cancel_job"
sleep 4   # the first job ends and reaches slurmdbd
run_job=$(sb --account=general -N2 --gres=gpu:a100:3 -J wl-capture-run --comment=wl-capture-run --wrap 'sleep 60')
pend_job=$(sb --account=research --qos=gpu-small --gres=gpu:a100:3 -J wl-capture-qos --wrap 'sleep 1')
held_job=$(sb --account=general --hold --gres=gpu:a100:1 -J ext-capture-held --wrap 'sleep 1')
trap 'scancel "$run_job" "$pend_job" "$held_job" 2>/dev/null || true' EXIT
for _ in $(seq 1 40); do
  [[ $(squeue -h -j "$run_job" -o %T) == RUNNING ]] && break; sleep 0.5
done
sleep 2

echo "$VERSION" >"$OUT/version.txt"
sacct --helpformat >"$OUT/sacct-helpformat.txt"
scontrol --oneliner show node >"$OUT/scontrol-show-node.txt"
scontrol --details --oneliner show node >"$OUT/scontrol-show-node-d.txt"
fmt=$(cd "$REPO" && "$PY" -c 'from broker.backends.slurm import parsers; print(parsers.squeue_format())')
SLURM_TIME_FORMAT=%s squeue --noheader --all --states=all --Format="$fmt" >"$OUT/squeue-O-us.txt"
sacct_fields=$(cd "$REPO" && "$PY" -c 'from broker.backends.slurm import parsers; print(",".join(parsers.SACCT_FIELDS))')
SLURM_TIME_FORMAT=%s sacct --allusers --parsable2 --allocations --noheader --delimiter="$US" \
  --starttime=now-600seconds --format="$sacct_fields" >"$OUT/sacct-us.txt"
sacct --allusers -P -X --starttime=now-600seconds \
  --format=JobID,JobName,Account,Partition,State,Start,End,ElapsedRaw,AllocTRES,Comment >"$OUT/sacct-P-X.txt"
sacct --allusers --starttime=now-600seconds --json >"$OUT/sacct.json"
# 22.05's squeue --json lists ended jobs by itself, 24.11's only with --states=all
squeue --all --states=all --json >"$OUT/squeue.json"
sinfo --json >"$OUT/sinfo.json"   # 22.05: nodes; 24.11: partition/state summaries
# scontrol --json: not in 22.05
scontrol --json show node >"$OUT/scontrol-show-node.json" 2>/dev/null || rm -f "$OUT/scontrol-show-node.json"
apis=$(apis)
echo "$apis" >"$OUT/rest-api-versions.txt"
for api in $apis; do
  rest "/slurm/$api/jobs" >"$OUT/rest-$api-jobs.json"
  rest "/slurm/$api/nodes" >"$OUT/rest-$api-nodes.json"
  rest "/slurmdb/$api/jobs?start_time=now-600seconds" >"$OUT/rest-$api-slurmdb-jobs.json"
  rest "/slurm/$api/diag" >"$OUT/rest-$api-diag.json"
done
limits
echo "captured Slurm $VERSION (REST $(paste -sd' ' <<<"$apis")) into $OUT: done=$done_job" \
  "cancelled=$cancel_job running=$run_job pending=$pend_job held=$held_job"
