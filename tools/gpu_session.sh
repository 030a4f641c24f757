#!/usr/bin/env bash
# One phase of a GPU session per device call, from the repository's root:
#
#     bash tools/gpu_session.sh PHASE [SECONDS] [ARGS...]
#
# PHASE   env    the machine: GPU, driver, versions, profilers; a vadd/softmax/matmul smoke run
#         tests  python3 -m pytest -m gpu (ARGS: more pytest arguments, e.g. a file or -k)
#         bench  benchmarks/run.py, one family at a time (ARGS: families; default memory
#                matmul attention tuning launch) and benchmarks/matmul.py --no-cluster
#         tools  a short ncu and compute-sanitizer run on one example script
# SECONDS the phase's whole budget (default 540): every step gets a timeout that ends it
#         before then, so the results are packed and come back even when a step hangs.
#
# Everything goes under $OUT (or ./gpu-session-out without it), at most 8 files and no
# subfolders, as the device tool returns them: PHASE-summary.txt (one line per step: exit
# status, seconds, log), PHASE.tar.gz (every log, junit XML, result tables, plots) and, for
# bench, the results files (PHASE-*.md). Phases can be chained in one call with &&... or ;
# a phase run a second time in one call writes PHASE-2-*. The machine is offline: lark and
# llvmlite come as wheels in .whl/
# (../shared/gpu/wheelhouse.sh makes them; carry `.whl` in the device call).
set -u
phase=${1:-}
limit=${2:-540}
shift 2 2>/dev/null || shift $#
case "$phase" in env|tests|bench|tools) ;; *)
    echo "usage: bash tools/gpu_session.sh env|tests|bench|tools [SECONDS] [ARGS...]" >&2
    exit 2 ;;
esac
case "$limit" in ''|*[!0-9]*) echo "gpu_session: SECONDS must be a whole number" >&2; exit 2;; esac

start=$(date +%s)
out=${OUT:-$PWD/gpu-session-out}
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session-$phase.XXXXXX")
mkdir -p "$out"
# phases chained in one device call (`... env 150 && ... tools 200`) each get their own files;
# a phase run twice in one call gets PHASE-2, PHASE-3, ...
tag=$phase; n=2
while [ -e "$out/$tag-summary.txt" ]; do tag=$phase-$n; n=$((n + 1)); done
summary=$work/summary.txt
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=$work/cache MPLBACKEND=Agg
# (the device machine's copy of the checkout may have no .git: then no commit is named)
echo "phase $phase, budget ${limit}s, $(date -u +%FT%TZ)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null)" >"$summary"

pack() {
    trap - EXIT INT TERM
    echo "packed after $(( $(date +%s) - start ))s" >>"$summary"
    cp "$summary" "$out/$tag-summary.txt"
    tar -czf "$out/$tag.tar.gz" -C "$work" --exclude=cache . 2>/dev/null
    cat "$summary"
}
trap pack EXIT
trap 'echo "stopped by a signal" >>"$summary"; exit 1' INT TERM

left() { echo $(( limit - ($(date +%s) - start) )); }

# record NAME RC SECONDS-STARTED LIMIT: one summary line (and the log's tail on a failure)
record() {
    local name=$1 rc=$2 t0=$3 t=$4 what=ok
    { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && what="TIMEOUT after ${t}s"
    [ "$rc" -ne 0 ] && [ "$what" = ok ] && what="FAILED rc=$rc"
    printf '%-5s %-28s %4ss  %s\n' "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$name" \
        "$(( $(date +%s) - t0 ))" "$what" >>"$summary"
    [ "$rc" -ne 0 ] && tail -n 15 "$work/$name.log" | sed 's/^/      | /' >>"$summary"
    return "$rc"
}

# step NAME SECONDS CMD...: CMD under a timeout that ends 20 s before the budget does
step() {
    local name=$1 want=$2; shift 2
    local t; t=$(left); t=$(( t - 20 < want ? t - 20 : want ))
    if [ "$t" -lt 5 ]; then
        echo "SKIP  $name: no time left" >>"$summary"; return 1
    fi
    local t0; t0=$(date +%s)
    timeout -k 5 "$t" "$@" >"$work/$name.log" 2>&1
    record "$name" $? "$t0" "$t"
}

# -- set-up: the wheels first on every interpreter's path (subprocesses that set PYTHONPATH
#    themselves too), then the checkout importable ------------------------------------------
setup() {
    if ls .whl/*.whl >/dev/null 2>&1; then
        if ! [ -f /tmp/site/.tile-installed ]; then
            timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile \
                --target /tmp/site .whl/*.whl && touch /tmp/site/.tile-installed || return 1
        fi
        # tests and benchmarks that start Python with their own PYTHONPATH must see the wheels
        # too: a .pth file that puts /tmp/site first. Only on the device machine (the device
        # tool sets OUT there; $OUT is unset on a developer's machine)
        if [ -n "${OUT:-}" ]; then
            local sp; sp=$(python3 -c 'import site; print(site.getsitepackages()[0])') \
                || return 1
            echo "import sys; sys.path.insert(0, '/tmp/site')" \
                >"$sp/00-tile-gpu-session.pth" || return 1
        fi
    fi
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    timeout 120 python3 -c 'import lark, llvmlite, numpy, tilelang, tilelang.driver
print("llvmlite", llvmlite.__version__, "lark", lark.__version__, "numpy", numpy.__version__)'
}
# in this shell (it exports PYTHONPATH), so not through step's timeout
t0=$(date +%s)
setup >"$work/setup.log" 2>&1
record setup $? "$t0" 240 || { echo "set-up failed: nothing else runs" >>"$summary"; exit 1; }

case "$phase" in
env)
    step machine 60 python3 tools/gpu_env.py "$work/env.json"
    step nvidia-smi 30 nvidia-smi -q
    for ex in vadd softmax layernorm matmul; do
        step "smoke-$ex" 120 python3 "examples/$ex.py" --backend cuda
    done
    ;;
tests)
    extra=()
    python3 -c 'import pytest_timeout' 2>/dev/null && extra+=(--timeout=240)
    step pytest-gpu $(( $(left) - 30 )) python3 -m pytest -m gpu -p no:cacheprovider -v -rfEs \
        --durations=0 --junitxml="$work/junit.xml" "${extra[@]}" "$@"
    # -v prints each outcome as it comes: a run stopped by its timeout still says how far
    grep -E ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' "$work/pytest-gpu.log" \
        | cut -c1-200 >"$work/outcomes.txt"
    echo "outcomes: $(grep -oE ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' \
        "$work/outcomes.txt" | sort | uniq -c | tr -s ' \n' ' ')" >>"$summary"
    tail -n 3 "$work/pytest-gpu.log" >>"$summary"
    ;;
bench)
    fams=("$@"); [ ${#fams[@]} -eq 0 ] && fams=(memory matmul attention tuning launch)
    mkdir -p "$work/results"
    for f in "${fams[@]}"; do
        if [ "$f" = no-cluster ]; then
            step matmul-no-cluster 300 python3 benchmarks/matmul.py --no-cluster \
                --out "$work/results/matmul-no-cluster.md"
        else
            step "bench-$f" 400 python3 benchmarks/run.py --only "$f" \
                --out-dir "$work/results"
        fi
    done
    for f in "$work"/results/*.md; do [ -f "$f" ] && cp "$f" "$out/$tag-${f##*/}"; done
    ;;
tools)
    for t in ncu compute-sanitizer; do
        command -v $t >/dev/null || echo "absent: $t (not on PATH)" >>"$summary"
    done
    if command -v ncu >/dev/null; then
        step ncu-vadd 240 ncu --clock-control none --target-processes all -k regex:vadd -c 2 \
            --section SpeedOfLight python3 examples/vadd.py --backend cuda
    fi
    if command -v compute-sanitizer >/dev/null; then
        step memcheck-vadd 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
            python3 examples/vadd.py --backend cuda
        step racecheck-softmax 150 compute-sanitizer --tool racecheck --error-exitcode 3 \
            python3 examples/softmax.py --backend cuda
    fi
    ;;
esac
