"""Run every command of the README's five-minute tour, in order, as pasted, and print each
one's exit code and wall time: the tour must run as a new user pastes it.

Run it from the repository root of a fresh clone with ``../shared/data`` beside it and the
test extras installed (the tour uses ONNX, torchrun and the shared data)::

    python benchmarks/readme_tour.py                 # a table; exit code 1 if any failed
    python benchmarks/readme_tour.py --json          # one record per command
    python benchmarks/readme_tour.py --list          # the commands, without running them

The commands are the lines of the ```bash blocks between "## A five-minute tour" and the
next "## " heading, with backslash continuations joined and comments left to the shell.
Their outputs go to ``readme-tour/NN.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

README = Path("README.md")


def tour_commands(text: str) -> list[str]:
    """The shell commands of the tour section of a README's text, in order."""
    start = text.index("## A five-minute tour")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else len(text)]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)  # continuation lines
        commands += [line.strip() for line in joined.splitlines() if line.strip()]
    return commands


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--logs", default="readme-tour", help="Folder for each command's output.")
    args = parser.parse_args()
    commands = tour_commands(README.read_text())
    if args.list:
        print("\n".join(commands))
        return 0
    logs = Path(args.logs)
    logs.mkdir(exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)  # the environment's calibkit and torchrun
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    records = []
    for i, command in enumerate(commands, 1):
        start = time.perf_counter()
        with open(logs / f"{i:02d}.log", "w") as log:
            rc = subprocess.run(["bash", "-c", command], stdout=log, stderr=subprocess.STDOUT,
                                env=env).returncode  # fmt: skip
        seconds = time.perf_counter() - start
        records.append({"command": command, "rc": rc, "seconds": round(seconds, 1)})
        if not args.json:
            print(f"{i:2d}  rc {rc}  {seconds:7.1f} s  {command}", flush=True)
    if args.json:
        print(json.dumps(records, indent=1))
    failed = [r for r in records if r["rc"] != 0]
    if not args.json:
        print(f"{len(records) - len(failed)} of {len(records)} commands exited 0")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
