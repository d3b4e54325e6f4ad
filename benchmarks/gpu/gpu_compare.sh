#!/usr/bin/env bash
# This checkout against a baseline on one GPU, in one call (issue 52 §7: the baseline rerun
# on the same card): the decode of the 60,000 CIFAR-10 JPEGs into memory, then the packed
# training throughput (benchmarks/speed/packed_speed.py), each with the baseline's calibkit
# (BASELINE, a copy of an earlier revision's src/, default .gpu-old/src) and with this one.
#   git archive REV src | tar -x -C .gpu-old     # the baseline, beside the JPEG pack
#   bash benchmarks/gpu/gpu_compare.sh               # on the GPU machine, from the repository root
# DEVICE, IMAGES and MEMBERS (defaults cuda, 20000, "1 24") size the throughput runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
BASE="${BASELINE:-.gpu-old/src}"
if [ ! -d ../shared/data/cifar10-jpeg ] && [ -f .gpu-data/cifar10-jpeg.bin ]; then
    python3 .gpu-data/unpack.py .gpu-data/cifar10-jpeg ../shared/data/cifar10-jpeg
fi
LOGS=$(mktemp -d)
for side in "$BASE" src; do
    log="$LOGS/$([ "$side" = src ] && echo new || echo baseline).txt"
    echo "== calibkit from $side"
    {
    PYTHONPATH="$side" python3 - <<'PY'
import time
from pathlib import Path

from calibkit.data._base import LazyImages
from calibkit.data._folders import class_tree

paths = [p for s in ("train", "test") for p in class_tree(Path(f"../shared/data/cifar10-jpeg/{s}"))[1]]
start = time.perf_counter()
LazyImages(paths, None).load()
print(f"decode {len(paths):,} JPEGs into memory: {time.perf_counter() - start:.1f} s")
PY
    # shellcheck disable=SC2086
    PYTHONPATH="$side" timeout 150 python3 benchmarks/speed/packed_speed.py --device "${DEVICE:-cuda}" \
        --images "${IMAGES:-20000}" --members ${MEMBERS:-1 24}
    } 2>&1 | tee "$log"
done
echo "== this checkout against the baseline"
python3 - "$LOGS/baseline.txt" "$LOGS/new.txt" <<'PY'
import re
import sys


def numbers(path: str) -> dict[str, float]:
    """The decode's seconds and each row's images/s, by name, from one side's output."""
    text = open(path).read()
    out = {f"decode (s)": float(m) for m in re.findall(r"into memory: ([\d.]+) s", text)}
    for row, rate in re.findall(r"^\| ([^|]+?) \| [\d.]+ \| ([\d,]+) \|", text, re.M):
        out[f"{row} (images/s)"] = float(rate.replace(",", ""))
    return out


old, new = numbers(sys.argv[1]), numbers(sys.argv[2])
print("| quantity | baseline | this checkout | this / baseline |")
print("| --- | --- | --- | --- |")
for key in old.keys() & new.keys():
    print(f"| {key} | {old[key]:,.1f} | {new[key]:,.1f} | {new[key] / old[key]:.2f}x |")
PY
rm -rf "$LOGS"
