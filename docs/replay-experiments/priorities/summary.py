"""The per-seed table of docs/replay.md ("Priorities and preemption") from the replay
outputs beside this file: ``python docs/replay-experiments/priorities/summary.py``."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
# seed -> (the file with its `default` run, the file with its `default+preempt` run)
SEEDS = {11: ("mix-s11.md", "mix-s11-cap.md"), 12: ("mix-s12-cap.md",) * 2, 13: ("mix-s13-cap.md",) * 2}
ROW = re.compile(r"^\| (default(?:\+preempt)?) \|(.*)\|$")


def tables(name: str) -> dict[str, list[list[str]]]:
    """policy -> its rows in the file's tables, in order (main, local users, by class)."""
    out: dict[str, list[list[str]]] = {}
    for line in (HERE / name).read_text(encoding="utf-8").splitlines():
        found = ROW.match(line)
        if found:
            out.setdefault(found.group(1), []).append([c.strip() for c in found.group(2).split("|")])
    return out


def number(text: str) -> float:
    return float(text.replace(",", ""))


def row(seed: int, without: list[list[str]], with_: list[list[str]]) -> str:
    (main_a, side_a, class_a), (main_b, side_b, class_b) = without, with_
    prod_a, prod_b = (c[1].split(" / ") for c in (class_a, class_b))
    scav_a, scav_b = (c[2].split(" / ") for c in (class_a, class_b))
    cells = [
        f"{prod_a[2]} / {prod_b[2]}",
        f"{number(prod_b[2]) / number(prod_a[2]):.2f}x",
        f"{prod_a[1]} / {prod_b[1]}",
        f"{main_a[0]} / {main_b[0]}",
        f"{main_a[1]} / {main_b[1]}",
        f"{main_a[2]} / {main_b[2]}",
        f"{scav_a[2]} / {scav_b[2]}",
        f"{class_b[3]} ({class_b[4]})",
        class_b[5],
        class_b[6],
        f"{main_a[11]} / {main_b[11]}",
        f"{side_a[2]} / {side_b[2]}",
    ]
    return f"| {seed} | " + " | ".join(cells) + " |"


def main() -> None:
    print(
        "| seed | production p95, local owner / broker owner | ratio | production mean | all jobs' mean "
        "| all jobs' p95 | gangs' p95 "
        "| scavenger p95 | preempted jobs (cuts) | GPU-h lost | preempted: mean / p95 delay | cloud spend "
        "| local users' p95 |"
    )
    print("|---:|" + "---:|" * 12)
    for seed, (first, second) in SEEDS.items():
        print(row(seed, tables(first)["default"], tables(second)["default+preempt"]))


if __name__ == "__main__":
    main()
