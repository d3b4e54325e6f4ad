#!/usr/bin/env bash
# One run on a GPU machine (issue 40 §3), from a fresh checkout, within 9 minutes on one
# H100 or H200: install calibkit, run the CUDA test tier, print the packed-training
# throughput table, run the training study at full CIFAR-10 scale (the train-cifar-gpu
# preset), and write every output to one folder ($OUT, default gpu-check/):
#   env.txt          the machine, the GPU, the versions
#   cuda-tier.txt    pytest -m cuda: every case on CUDA against the CPU
#   throughput.md    benchmarks/speed/packed_speed.py: one ResNet-20 against packs of 8 and 24
#   maccal-group.md  benchmarks/speed/maccal_group_speed.py: MaC-Cal's stage 2 alone and together
#   layout.md        benchmarks/gpu/packed_layout.py: vmap against the Packed-Ensembles layout
#                    (channels_last, bf16, torch.compile), 8 and 27 ResNet-20s (issue 52 §2)
#   estimate.txt     calibkit bench train-cifar-gpu --estimate, measured on this GPU
#   study.txt        the study's progress lines, headline table, verdicts and timing
#   real-gpu.md      the study's tables and verdicts (the section docs/real.md takes)
#   results.sqlite   the study's store (calibkit report results.sqlite -o report/)
#   report.md        where the study stopped early: the report of the runs it finished
#   skipped.txt      what did not run, and why
#
# The CIFAR-10 JPEG tree must lie in ../shared/data/cifar10-jpeg, or be packed beside the
# repository for a machine that receives the repository alone (../shared/gpu/README.md):
#   python ../shared/gpu/pack.py ../shared/data/cifar10-jpeg .gpu-data/cifar10-jpeg
#   cp ../shared/gpu/unpack.py .gpu-data/
# then, on the GPU machine, from the repository root:  bash benchmarks/gpu/gpu_check.sh
# The study stops at the time left (STUDY_SECONDS, default what remains of BUDGET seconds,
# 520 unless set); run again on the same machine, it finishes what is missing: the bench
# resumes from its store and its members' epoch checkpoints in build/gpu-study/, a folder
# git ignores, so a device tool that syncs the working tree between calls keeps it.
# STUDY_ONLY=1 skips the CUDA tier, the throughput table and the estimate (a second call).
# REGIME=1 runs the protocol tries of benchmarks/gpu/regime_gpu.py (regime.txt, regime.jsonl)
# instead of the study: with STUDY_ONLY=1, `STUDY_ONLY=1 REGIME=1 BUDGET=560 bash ...`.
# SKIP lists parts to leave out, of tier, throughput, maccal, layout and estimate: the call
# for the CUDA tier, the layouts and the protocol tries alone is
#   SKIP="throughput maccal estimate" REGIME=1 BUDGET=560 bash benchmarks/gpu/gpu_check.sh
# WORKERS (default 8) processes share the GPU: the pack trains in one of them, then the
# runs' stage 2, Neural Clamping and measurements run side by side instead of in one line.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-gpu-check}"
mkdir -p "$OUT"
START=$(date +%s)
BUDGET="${BUDGET:-520}"
skip() { [[ " ${SKIP:-} " == *" $1 "* ]] && echo "$1: skipped (SKIP)" >> "$OUT/skipped.txt"; }
elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "[$(elapsed) s] $*"; }
: > "$OUT/skipped.txt"
export PYTHONUNBUFFERED=1

say "install"
if python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1; then
    CALIBKIT=(calibkit)
else  # an old setuptools cannot build it: run from the source tree (the scan in PyTorch)
    echo "pip install failed (see the end of install.log); ran from src/ instead" >> "$OUT/skipped.txt"
    tail -3 "$OUT/install.log" >> "$OUT/skipped.txt"
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
    CALIBKIT=(python3 -m calibkit)
fi
rm -f "$OUT/install.log"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch, calibkit, os; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'calibkit', calibkit.__version__, 'cpus', os.cpu_count())"
    git rev-parse HEAD 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [ ! -d ../shared/data/cifar10-jpeg ] && [ -f .gpu-data/cifar10-jpeg.bin ]; then
    say "unpack the CIFAR-10 JPEG tree"
    python3 .gpu-data/unpack.py .gpu-data/cifar10-jpeg ../shared/data/cifar10-jpeg
fi

STUDY="${STUDY:-build/gpu-study}"
if [ "${STUDY_ONLY:-0}" = 1 ]; then
    echo "CUDA tier, throughput and estimate: skipped (STUDY_ONLY=1)" >> "$OUT/skipped.txt"
else
    skip tier || { say "CUDA tier"
    timeout 180 python3 -m pytest -m cuda tests/cuda -q -p no:cacheprovider -rfEs \
        -o addopts="" > "$OUT/cuda-tier.txt" 2>&1
    echo "exit code $?" >> "$OUT/cuda-tier.txt"
    tail -4 "$OUT/cuda-tier.txt"; }

    skip throughput || { say "throughput"
    timeout 120 python3 benchmarks/speed/packed_speed.py --device cuda --images 20000 --members 1 8 24 \
        > "$OUT/throughput.md" 2>&1 || echo "throughput: stopped at 120 s or failed" >> "$OUT/skipped.txt"
    cat "$OUT/throughput.md"; }

    skip maccal || { say "MaC-Cal stage 2 alone against together"
    timeout 90 python3 benchmarks/speed/maccal_group_speed.py --device cuda --members 3 9 \
        > "$OUT/maccal-group.md" 2>&1 || echo "maccal-group: stopped at 90 s or failed" >> "$OUT/skipped.txt"
    cat "$OUT/maccal-group.md"; }

    skip layout || { say "packed layouts: vmap against Packed-Ensembles"
    timeout 150 python3 benchmarks/gpu/packed_layout.py --device cuda --members 8 27 --compile \
        --steps 20 > "$OUT/layout.md" 2>&1 || echo "layout: stopped at 150 s or failed" >> "$OUT/skipped.txt"
    cat "$OUT/layout.md"; }
fi

if [ -d ../shared/data/cifar10-jpeg ]; then
    if [ "${STUDY_ONLY:-0}" != 1 ] && ! skip estimate; then
        say "estimate"
        timeout 60 "${CALIBKIT[@]}" bench train-cifar-gpu --estimate > "$OUT/estimate.txt" 2>&1
        cat "$OUT/estimate.txt"
    fi
    LEFT=$(( BUDGET - $(elapsed) ))
    if [ "${REGIME:-0}" = 1 ]; then  # the protocol tries instead of the study (issue 52 §5)
        say "protocol tries (at most $LEFT s)"
        # stopped at the time left (a try cut short resumes from its checkpoints on a rerun)
        timeout --signal=INT "$LEFT" python3 benchmarks/gpu/regime_gpu.py --device cuda -o build/regime \
            --budget "$((LEFT - 30))" > "$OUT/regime.txt" 2>&1 || echo "regime: stopped at $LEFT s or failed" >> "$OUT/skipped.txt"
        cp build/regime/rows.jsonl "$OUT/regime.jsonl" 2>/dev/null
        cat "$OUT/regime.txt"
        say "done"
        exit 0
    fi
    STUDY_SECONDS="${STUDY_SECONDS:-$LEFT}"
    say "study (at most $STUDY_SECONDS s)"
    timeout --signal=INT "$STUDY_SECONDS" "${CALIBKIT[@]}" bench train-cifar-gpu -o "$STUDY" --workers "${WORKERS:-8}" \
        --doc "$OUT/real-gpu.md" > "$OUT/study.txt" 2>&1
    code=$?
    echo "exit code $code after $(elapsed) s" >> "$OUT/study.txt"
    [ "$code" -eq 124 ] || [ "$code" -eq 130 ] && \
        echo "study: stopped at $STUDY_SECONDS s; run again to finish it (the bench resumes)" >> "$OUT/skipped.txt"
    cp "$STUDY/results.sqlite" "$OUT/" 2>/dev/null
    if [ ! -s "$OUT/real-gpu.md" ] && [ -f "$STUDY/results.sqlite" ]; then  # stopped early
        "${CALIBKIT[@]}" report "$STUDY/results.sqlite" -o gpu-report > /dev/null 2>&1 && \
            cp gpu-report/report.md "$OUT/report.md"
    fi
    tail -25 "$OUT/study.txt"
else
    echo "study and estimate: no ../shared/data/cifar10-jpeg and no .gpu-data pack" >> "$OUT/skipped.txt"
fi
say "done"
cat "$OUT/skipped.txt"
