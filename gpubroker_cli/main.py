"""gpubroker COMMAND ...: argument parsing and the commands, each a short function.

Exit codes: 0 ok, 1 the API refused (error and its fields printed), 2 bad arguments or
spec file, 3 cannot connect or the token is refused.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import yaml

from gpubroker_cli import API_ERROR, BAD_ARGUMENTS, NO_CONNECTION, OK, config, output
from gpubroker_cli.client import ApiError, Client, ConnectError

ENDED = {"completed", "failed", "cancelled", "rejected"}


class UsageError(Exception):
    """Bad arguments or an unreadable spec file (exit code 2)."""


def _month(text: str) -> str:
    if not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", text):
        raise argparse.ArgumentTypeError(f"expected YYYY-MM, got {text!r}")
    return text


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 1000, got {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpubroker", description="Submit and follow GPU workloads through the broker.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    login = sub.add_parser("login", help="store the server URL and an API token")
    login.add_argument("--url", required=True)
    login.add_argument("--token", required=True)
    submit = sub.add_parser("submit", help="submit a workload described in a YAML file")
    submit.add_argument("spec", type=Path)
    submit.add_argument("--project", help="project id (or name); overrides the file's project")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="show where it would go, when it would start and what it would cost; submit nothing",
    )
    lst = sub.add_parser("list", help="your projects' workloads, newest first")
    lst.add_argument("--state")
    lst.add_argument("--limit", type=int, default=50)
    for name, text in (
        ("status", "state and the local queue reason in plain words"),
        ("explain", "ranking and exclusions of the placement"),
        ("cancel", "cancel a workload"),
    ):
        sub.add_parser(name, help=text).add_argument("id", type=int)
    watch = sub.add_parser("watch", help="follow a workload until it ends, printing each change")
    watch.add_argument("id", type=int)
    watch.add_argument("--interval", type=_positive, default=2.0, help="seconds between polls (2)")
    watch.add_argument("--timeout", type=_positive, help="give up after this many seconds")
    logs = sub.add_parser("logs", help="a workload's output, read from its cluster")
    logs.add_argument("id", type=int)
    logs.add_argument("--tail", type=_count, help="only the last N lines (1-1000)")
    logs.add_argument("--follow", action="store_true", help="keep printing new lines until the job ends")
    logs.add_argument("--worker", type=int, help="worker number (0-based) where each has its own output")
    logs.add_argument("--interval", type=_positive, default=2.0, help="seconds between polls with --follow (2)")
    sub.add_parser("budgets", help="your tenants' GPU-hour budgets: used, held, remaining, forecast")
    charge = sub.add_parser("chargeback", help="a month's chargeback (finance)")
    charge.add_argument("--month", type=_month, required=True)
    charge.add_argument("--csv", action="store_true", help="print the CSV export")
    return p


def cmd_login(args, out) -> int:
    client = Client(config.Config(url=args.url.rstrip("/"), token=args.token))
    me = client.get("me/")  # proves URL and token before storing them
    path = config.save(url=args.url, token=args.token)
    print(f"logged in as {me.get('username')} at {args.url}; settings in {path}", file=out)
    return OK


def load_spec(path: Path, project: str | None, client: Client) -> dict:
    try:
        spec = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{path}: expected a mapping of spec fields")
    if project is not None:
        spec["project"] = project
    if isinstance(spec.get("project"), str) and not spec["project"].isdigit():
        spec["project"] = _project_id(client, spec["project"])
    elif isinstance(spec.get("project"), str):
        spec["project"] = int(spec["project"])
    return spec


def _project_id(client: Client, name: str) -> int:
    matches = [
        p
        for p in client.list_all("projects/")
        if name in (p.get("name"), p.get("slug"), f"{p.get('tenant')}/{p.get('slug')}")
    ]
    if len(matches) != 1:
        raise UsageError(
            f"project {name!r}: {'no' if not matches else 'more than one'} project of yours has that name; give its id"
        )
    return int(matches[0]["id"])


def cmd_submit(args, out, client: Client) -> int:
    spec = load_spec(args.spec, args.project, client)
    if args.dry_run:
        print(output.preview(client.post("workloads/preview/", spec)), file=out)
        return OK
    workload = client.post("workloads/", spec, idempotent=True)
    print(f"submitted {workload.get('id')} {workload.get('name')}: {workload.get('state')}", file=out)
    return OK


def cmd_list(args, out, client: Client) -> int:
    page = client.get("workloads/", state=args.state, limit=args.limit)
    rows = [
        [
            w.get("id"),
            w.get("name"),
            w.get("project"),
            w.get("state"),
            w.get("cluster"),
            w.get("local_reason_text") or w.get("reason"),
            w.get("created_at"),
        ]
        for w in page.get("results", [])
    ]
    print(output.table(["id", "name", "project", "state", "cluster", "why", "created"], rows), file=out)
    return OK


def cmd_status(args, out, client: Client) -> int:
    print(output.workload_status(client.get(f"workloads/{args.id}/")), file=out)
    return OK


def cmd_explain(args, out, client: Client) -> int:
    print(output.explain(client.get(f"workloads/{args.id}/explain/")), file=out)
    return OK


def cmd_cancel(args, out, client: Client) -> int:
    answer = client.post(f"workloads/{args.id}/cancel/")
    print(f"cancel requested for {args.id}: {answer.get('state')}", file=out)
    return OK


def cmd_watch(args, out, client: Client) -> int:
    deadline = time.monotonic() + args.timeout if args.timeout else None
    seen = None
    while True:
        w = client.get(f"workloads/{args.id}/")
        now = (w.get("state"), w.get("local_reason_text") or w.get("reason") or "")
        if now != seen:
            seen = now
            print(f"{time.strftime('%H:%M:%S')}  {now[0]}" + (f"  ({now[1]})" if now[1] else ""), file=out, flush=True)
        if now[0] in ENDED:
            return OK if now[0] == "completed" else API_ERROR
        if deadline is not None and time.monotonic() > deadline:
            print(f"still {now[0]} after {args.timeout:g} s; stopped watching", file=out)
            return API_ERROR
        time.sleep(args.interval)


def cmd_logs(args, out, client: Client) -> int:
    """Print the output; pages of 1000 lines from the start, or the last --tail lines; with
    --follow ask for the lines after the last one printed until the workload has ended."""
    path, worker = f"workloads/{args.id}/logs/", args.worker
    page = (
        client.get(path, worker=worker, tail=args.tail)
        if args.tail
        else client.get(path, worker=worker, offset=0, limit=1000)
    )
    while True:
        for line in page.get("lines", []):
            print(line, file=out, flush=True)
        if not page.get("available"):
            print(f"gpubroker: {page.get('note') or 'no output'}", file=sys.stderr)
            return API_ERROR if page.get("gone") else OK
        if not page.get("more") and (not args.follow or page.get("ended")):
            return OK
        if not page.get("more"):
            time.sleep(args.interval)
        page = client.get(path, worker=worker, offset=page.get("next_offset"), limit=1000)


def cmd_chargeback(args, out, client: Client) -> int:
    if args.csv:
        out.write(client.get_text("chargeback/", month=args.month, format="csv"))
        return OK
    body = client.get("chargeback/", month=args.month)
    rows, totals = body.get("rows", []), body.get("totals") or {}
    keys = list(rows[0]) if rows else ["month", "tenant", "project", "user", "gpu_class", *totals]
    table = [[r.get(k) for k in keys] for r in rows]
    table.append([totals.get(k, "Total" if i == 0 else "") for i, k in enumerate(keys)])
    print(output.table(keys, table), file=out)
    return OK


def cmd_budgets(args, out, client: Client) -> int:
    print(output.budgets(client.get("budgets/")), file=out)
    return OK


COMMANDS = {
    "submit": cmd_submit,
    "list": cmd_list,
    "status": cmd_status,
    "explain": cmd_explain,
    "cancel": cmd_cancel,
    "watch": cmd_watch,
    "logs": cmd_logs,
    "chargeback": cmd_chargeback,
    "budgets": cmd_budgets,
}


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = parser().parse_args(argv)  # exits 2 with argparse's message on bad arguments
    try:
        if args.command == "login":
            return cmd_login(args, out)
        return COMMANDS[args.command](args, out, Client(config.load()))
    except UsageError as exc:
        print(f"gpubroker: {exc}", file=err)
        return BAD_ARGUMENTS
    except (ConnectError, config.ConfigError) as exc:
        print(f"gpubroker: {exc}", file=err)
        return NO_CONNECTION
    except ApiError as exc:
        print("\n".join(exc.lines()), file=err)
        return API_ERROR
    except KeyboardInterrupt:
        return API_ERROR
