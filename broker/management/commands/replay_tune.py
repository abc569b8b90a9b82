"""`manage.py replay_tune TRACES...`: choose the default preset's knobs on the FIRST half of
each trace (never the second: there is no option for it) and write them to the knobs
file that `replay_sweep` reads."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.fleet_file import FleetError
from broker.management.commands.replay_sweep import _floats
from broker.management.commands.replay_trace import isolated_database
from broker.replay.knobs import KNOBS_FILE
from broker.replay.trace import TraceError
from broker.replay.tuning import TunePlan, choose, grid, merge, tune, write_choice


def _optional(text: str, name: str) -> tuple[float | None, ...]:
    """Comma-separated numbers; 'file' keeps the policy file's value."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    numbers = [p for p in parts if p != "file"]
    return (*((None,) if "file" in parts else ()), *(_floats(",".join(numbers), name) if numbers else ()))


class Command(BaseCommand):
    help = "Tune the default preset's knobs on the first half of each trace; write the knobs file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("traces", nargs="+", help="trace CSV files (only their first halves are replayed)")
        parser.add_argument("--fleet", default=str(settings.GPUBROKER_FLEET_FILE))
        parser.add_argument("--compress", default="5", help="arrival compressions")
        parser.add_argument("--seeds", default="11")
        parser.add_argument("--burst-minutes", default="0,30,120", help="burst.min_onprem_wait_s, in minutes")
        parser.add_argument("--reassess-shares", default="file", help="burst.reassess_share ('file': as it is)")
        parser.add_argument("--aging-per-hour", default="file", help="aging.queue_weight_per_hour ('file': as it is)")
        parser.add_argument(
            "--hold-withdraw-minutes", default="file", help="policy_hold_withdraw_s, in minutes ('file': as it is)"
        )
        parser.add_argument("--wait-weights", default="file", help="weights.queue_wait_s ('file': the preset's)")
        parser.add_argument(
            "--max-jobs", type=int, default=None, help="only the first N jobs of each first half (a cheaper tuning)"
        )
        parser.add_argument("--local-queues", choices=("backfill", "strict"), default="backfill")
        parser.add_argument("--results", default="replay-tune.json", help="every tuning run; kept runs are not rerun")
        parser.add_argument(
            "--merge", default="", help="comma-separated results files of other tuning runs, ranked with this one"
        )
        parser.add_argument("--choose-only", action="store_true", help="rank what the results files hold; run nothing")
        parser.add_argument("--knobs-out", default=str(KNOBS_FILE), help="where the chosen knobs go")

    def handle(self, *args, **opts) -> None:
        plan = TunePlan(
            traces=tuple(Path(t) for t in opts["traces"]),
            compressions=_floats(opts["compress"], "compress"),
            seeds=tuple(int(s) for s in _floats(opts["seeds"], "seeds")),
            grid=tuple(
                grid(
                    _floats(opts["burst_minutes"], "burst-minutes"),
                    _optional(opts["reassess_shares"], "reassess-shares"),
                    _optional(opts["wait_weights"], "wait-weights"),
                    _optional(opts["aging_per_hour"], "aging-per-hour"),
                    _optional(opts["hold_withdraw_minutes"], "hold-withdraw-minutes"),
                )
            ),
            fleet=Path(opts["fleet"]),
            queueing=opts["local_queues"],
            max_jobs=opts["max_jobs"],
        )
        if not opts["choose_only"]:
            try:
                with isolated_database():
                    tune(plan, Path(opts["results"]), progress=self.stderr.write)
            except (TraceError, FleetError, ValueError) as exc:
                raise CommandError(str(exc)) from None
        results = merge([Path(opts["results"]), *(Path(p) for p in opts["merge"].split(",") if p.strip())])
        ranked = choose(results, plan.grid)
        for s in ranked:
            self.stdout.write(f"{s.knobs.label}: target met in {s.met} cell(s), mean worse ratio {s.key[1]:.3f}")
        chosen = write_choice(Path(opts["knobs_out"]), results, ranked)
        self.stdout.write(f"chosen: {chosen.label} -> {opts['knobs_out']}")
