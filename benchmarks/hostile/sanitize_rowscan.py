"""The compiled row scan under AddressSanitizer and UndefinedBehaviorSanitizer (issue 43).

Builds ``src/calibkit/metrics/_rowscan.c`` once with ``-fsanitize=address,undefined`` (and
``-fno-sanitize-recover=all``: any undefined behaviour aborts) into a temporary folder,
then runs ``tests/metrics/test_native_scan.py`` against that build: a ``sitecustomize``
puts the sanitized module in ``sys.modules["calibkit.metrics._rowscan"]`` before calibkit imports
it, and the sanitizer runtimes are preloaded (Python itself is not instrumented, so leak
detection is off). Exit status: pytest's. Needs gcc (or ``CC``) with its sanitizer runtimes.

    python benchmarks/hostile/sanitize_rowscan.py          # about a minute
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLAGS = [
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-shared",
    "-fPIC",
]

SITE = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("calibkit.metrics._rowscan", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["calibkit.metrics._rowscan"] = module
"""


def runtime(cc: str, name: str) -> str:
    return subprocess.run(
        [cc, f"-print-file-name={name}"], capture_output=True, text=True, check=True
    ).stdout.strip()


def main() -> int:
    cc = os.environ.get("CC", "gcc")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / f"_rowscan{sysconfig.get_config_var('EXT_SUFFIX')}"
        include = sysconfig.get_paths()["include"]
        build = [
            cc,
            *FLAGS,
            f"-I{include}",
            str(ROOT / "src/calibkit/metrics/_rowscan.c"),
            "-o",
            str(target),
        ]
        print(" ".join(build), flush=True)
        subprocess.run(build, check=True)
        (Path(tmp) / "sitecustomize.py").write_text(SITE.format(path=str(target)))
        env = os.environ | {
            "LD_PRELOAD": f"{runtime(cc, 'libasan.so')}:{runtime(cc, 'libubsan.so')}",
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
            "PYTHONPATH": os.pathsep.join([tmp, os.environ.get("PYTHONPATH", "")]),
            "CI": "1",  # the kernel tests must run, not skip
            "CALIBKIT_SANITIZED": "1",  # the test that runs this script does not recurse
        }
        check = (
            "import calibkit.metrics._rowscan as m; print('sanitized build in use:', m.__file__)"
        )
        subprocess.run([sys.executable, "-c", check], env=env, check=True)
        test = ROOT / "tests/metrics/test_native_scan.py"
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(test)],
            env=env,
            cwd=ROOT,
        ).returncode


if __name__ == "__main__":
    sys.exit(main())
