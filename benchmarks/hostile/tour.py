"""Run every command of the tour (docs/tour.md), in order, as pasted, and print each
one's exit code, wall time and longest silence (the longest stretch without a line of
output, off a terminal: stdout and stderr piped, as a log or CI sees them): the tour must
run as a new user pastes it, and no command may go quiet for long (issue 42 §2).

Run it from the repository root of a fresh clone with ``../shared/data`` beside it and the
test extras installed (the tour uses ONNX, torchrun and the shared data)::

    python benchmarks/hostile/tour.py                 # a table; exit code 1 if any failed
    python benchmarks/hostile/tour.py --json          # one record per command
    python benchmarks/hostile/tour.py --list          # the commands, without running them
    python benchmarks/hostile/tour.py --only 5 23     # again, some of them (outputs removed)

The commands are the lines of the page's ```bash blocks, with backslash continuations
joined and comments left to the shell. Their outputs go to ``readme-tour/NN.log``.
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

TOUR = Path("docs/tour.md")


def tour_commands(text: str) -> list[str]:
    """The shell commands of the tour's text, in order."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)  # continuation lines
        commands += [line.strip() for line in joined.splitlines() if line.strip()]
    return commands


def run_logged(command: str, log_path: Path, env: dict[str, str]) -> tuple[int, float, float]:
    """Run ``command`` in bash with its output (stdout and stderr, one pipe) written to
    ``log_path``; returns (exit code, seconds, the longest gap in seconds between the start,
    each line (or progress update ending in a carriage return) and the end)."""
    start = time.perf_counter()
    last, longest = start, 0.0
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else b"":
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
            log.write(chunk)
        rc = proc.wait()
    end = time.perf_counter()
    return rc, end - start, max(longest, end - last)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--logs", default="readme-tour", help="Folder for each command's output.")
    parser.add_argument(
        "--only",
        type=int,
        nargs="+",
        metavar="N",
        help="Run only these commands (numbered from 1, as the table numbers them).",
    )
    args = parser.parse_args()
    commands = tour_commands(TOUR.read_text())
    if args.list:
        print("\n".join(commands))
        return 0
    logs = Path(args.logs)
    logs.mkdir(exist_ok=True)
    bin_dir = str(Path(sys.executable).parent)  # the environment's calibkit and torchrun
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    records = []
    for i, command in enumerate(commands, 1):
        if args.only and i not in args.only:
            continue
        rc, seconds, silence = run_logged(command, logs / f"{i:02d}.log", env)
        records.append(
            {
                "command": command,
                "rc": rc,
                "seconds": round(seconds, 1),
                "longest_silence": round(silence, 1),
            }
        )
        if not args.json:
            print(
                f"{i:2d}  rc {rc}  {seconds:7.1f} s  silent at most {silence:6.1f} s  {command}",
                flush=True,
            )
    if args.json:
        print(json.dumps(records, indent=1))
    failed = [r for r in records if r["rc"] != 0]
    left = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=normal"], capture_output=True, text=True
    ).stdout.splitlines()
    if not args.json:
        print(
            f"{len(records) - len(failed)} of {len(records)} commands exited 0; the longest "
            f"silence {max(r['longest_silence'] for r in records):.1f} s; "
            f"{len(left)} untracked or changed items left in the clone: "
            + " ".join(line[3:] for line in left)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
