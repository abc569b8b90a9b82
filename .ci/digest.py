"""What CI prints last: each failed test with the start of its message, then the stack's
network report in short. The log of a failed run is often read only by its head and its tail
(the lanes' logs in the middle can be cut), so the why of a failure must also be at the end.
Standard library only; reads test-artifacts/junit*.xml and test-artifacts/stack-diagnostics.txt;
prints at most LIMIT characters and nothing when every test passed."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

LIMIT = 1900
ARTIFACTS = Path(sys.argv[1] if len(sys.argv) > 1 else "test-artifacts")


def failures() -> list[str]:
    out = []
    for path in sorted(ARTIFACTS.glob("junit*.xml")):
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as exc:
            out.append(f"{path.name}: unreadable ({exc})")
            continue
        for case in root.iter("testcase"):
            for bad in (*case.findall("failure"), *case.findall("error")):
                message = " ".join((bad.get("message") or bad.text or "").split())
                out.append(f"{path.stem.removeprefix('junit-')}: {case.get('name')}: {message[:240]}")
    return out


def network() -> list[str]:
    """The service lines of the first report and the first error line of each log."""
    try:
        text = (ARTIFACTS / "stack-diagnostics.txt").read_text()
    except OSError:
        return []
    lines, logs = [], set()
    for line in text.splitlines():
        if line.startswith("== ") and lines:
            break  # the first failed test's report only: the later ones follow from it
        if " log: " in line:
            service = line.split(" log: ", 1)[0].strip()
            if service in logs:
                continue
            logs.add(service)
        compact = line.replace("DNS records ", "dns ").replace("resolves to ", "-> ").replace("restarts ", "r")
        lines.append(compact[:170])
    return lines


def main() -> int:
    failed = failures()
    if not failed:
        return 0
    text = "\n".join(["=== digest: failed tests ===", *failed[:8], *network()])
    print(text[:LIMIT])
    return 0


if __name__ == "__main__":
    sys.exit(main())
