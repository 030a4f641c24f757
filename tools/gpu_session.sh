#!/usr/bin/env bash
# A GPU session from the repository's root, on a lent machine that is offline and runs one
# command of at most 10 minutes (docs/python-api.md, "A GPU session"):
#
#     GPU_COMMIT=<sha> bash tools/gpu_session.sh all [SECONDS]      # the whole session, one call
#     bash tools/gpu_session.sh PHASE [SECONDS] [ARGS...]           # one part again
#     bash tools/gpu_session.sh digest                              # the sources' digest, here
#
# PHASE   all    in priority order, each step until its share of SECONDS (default 540) is
#                used up, time an earlier step leaves unused passing to the later ones:
#                set-up (wheels) and the environment record (gpu_env.py, nvidia-smi), fixed
#                60 + 45 s; then of the rest (less 25 s to pack): pytest -m gpu 40% (each
#                test's phases at most 60 s), the benchmark families matmul 17%, attention
#                17%, memory 14%, launch 6% (benchmarks/run.py --gpu-only: no emulator counts)
#         env    the machine: GPU, driver, versions, profilers; a vadd/softmax/matmul smoke run
#         tests  python3 -m pytest -m gpu (ARGS: more pytest arguments, e.g. a file or -k)
#         bench  benchmarks/run.py, one family at a time (ARGS: families; default memory
#                matmul attention tuning launch) and benchmarks/matmul.py --no-cluster
#         tools  a short ncu and compute-sanitizer run on one example script
# SECONDS the phase's whole budget (default 540): every step gets a timeout that ends it
#         before then, so the results are packed and come back even when a step hangs.
#
# Everything goes under $OUT (or ./gpu-session-out without it), at most 8 files and no
# subfolders, as the device tool returns them: PHASE-summary.txt (the commit and sources'
# digest, one line per step: exit status, seconds, log), PHASE.tar.gz (every log, junit XML,
# result tables, plots) and, for all and bench, the results file (PHASE-*.md); all adds
# all-env.json, all-junit.xml and all-outcomes.txt (one line per test). Phases can be chained
# in one call with &&... or ; a phase run a second time in one call writes PHASE-2-*. The
# machine's checkout has no .git: GPU_COMMIT names the commit sent, and the summary's digest
# of the sources (`digest` prints the same here) shows what arrived. The machine is offline:
# lark and llvmlite come in .whl/ (../shared/gpu/wheelhouse.sh makes the wheels,
# tools/gpu_wheels_xz.sh packs them into .whl/site.tar.xz to fit the 64 MiB carry; carry
# `.whl` in the device call).
set -u
phase=${1:-}
limit=${2:-540}
nargs=$#
shift 2 2>/dev/null || shift $#
# what the session ran: the sources a result depends on, by content (the checkout sent to
# the machine has no .git, so this is how the two sides compare)
digest() {
    find tilelang examples benchmarks tests tools grammar -type f \
        \( -name '*.py' -o -name '*.tile' -o -name '*.sh' -o -name '*.json' -o -name '*.lark' \) \
        -not -path '*/__pycache__/*' 2>/dev/null | LC_ALL=C sort \
        | while IFS= read -r f; do printf '%s\n' "$f"; cat "$f"; done | sha256sum | cut -c1-16
}
case "$phase" in all|env|tests|bench|tools) ;;
digest) [ "$nargs" -eq 1 ] || { echo "usage: bash tools/gpu_session.sh digest" >&2; exit 2; }
    digest; exit 0 ;;
*)
    echo "usage: bash tools/gpu_session.sh all|env|tests|bench|tools [SECONDS] [ARGS...]" \
        "(or: digest)" >&2
    exit 2 ;;
esac
[ "$phase" = all ] && [ $# -gt 0 ] && {
    echo "gpu_session: all takes no ARGS (run a phase to choose tests or families)" >&2; exit 2; }
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
commit=$(git rev-parse HEAD 2>/dev/null) || commit=${GPU_COMMIT:-unknown (no .git, no GPU_COMMIT)}
echo "phase $phase, budget ${limit}s, $(date -u +%FT%TZ), commit $commit," \
    "sources $(digest)" >"$summary"

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

# until NAME SECONDS-FROM-START CMD...: step with a deadline instead of a length, so that a
# step's unused time passes to the later ones (the all phase's boxes)
until_() {
    local name=$1 at=$2; shift 2
    step "$name" $(( at - ($(date +%s) - start) )) "$@"
}

# pytest -m gpu into $work: junit XML, -v outcomes (a run stopped by its timeout still says
# how far it got), a line of counts in the summary
gpu_tests() {
    local name=$1 at=$2; shift 2
    # each test at most TEST_LIMIT s, and none starting within 15 s of the box's end, so that
    # pytest ends by itself and writes the junit XML (tools/pytest_test_alarm.py)
    PYTHONPATH=$PWD/tools:$PYTHONPATH until_ "$name" "$at" python3 -m pytest -m gpu \
        -p no:cacheprovider -v -rfEs --durations=0 --junitxml="$work/junit.xml" \
        -p pytest_test_alarm --test-alarm="$TEST_LIMIT" --test-deadline=$(( start + at - 15 )) \
        "$@"
    grep -E ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' "$work/$name.log" \
        | cut -c1-200 >"$work/outcomes.txt"
    echo "outcomes: $(grep -oE ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' \
        "$work/outcomes.txt" | sort | uniq -c | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')" \
        >>"$summary"
    tail -n 3 "$work/$name.log" >>"$summary"
}

# -- set-up: the wheels first on every interpreter's path (subprocesses that set PYTHONPATH
#    themselves too), then the checkout importable ------------------------------------------
# the wheels' folder: a fresh machine's /tmp (GPU_SITE elsewhere: a dry run here)
site=${GPU_SITE:-/tmp/site}
setup() {
    local wheels=
    if compgen -G '.whl/*.whl' >/dev/null || compgen -G '.whl/*.tar.xz' >/dev/null; then
        if ! [ -f "$site/.tile-installed" ]; then
            mkdir -p "$site" || return 1
            # tools/gpu_wheels_xz.sh's archive: the wheels' files, unpacked as pip would
            for x in .whl/*.tar.xz; do
                [ -f "$x" ] || continue
                timeout 60 tar -xJf "$x" -C "$site" || return 1
            done
            if compgen -G '.whl/*.whl' >/dev/null; then
                timeout 120 python3 -m pip install -q --no-index --no-deps --no-compile \
                    --target "$site" .whl/*.whl || return 1
            fi
            touch "$site/.tile-installed"
        fi
        wheels=$site
        # tests and benchmarks that start Python with their own PYTHONPATH must see the wheels
        # too: a .pth file that puts $site first. Only on the device machine (the device
        # tool sets OUT there and sends no .git) or in a virtual environment (a dry run):
        # never into a developer's own Python
        local venv; venv=$(python3 -c 'import sys; print(int(sys.prefix != sys.base_prefix))')
        if [ -n "${OUT:-}" ] && { [ ! -e .git ] || [ "$venv" = 1 ]; }; then
            local sp; sp=$(python3 -c 'import site; print(site.getsitepackages()[0])') \
                || return 1
            echo "import sys; sys.path.insert(0, '$site')" \
                >"$sp/00-tile-gpu-session.pth" || return 1
        fi
    fi
    export PYTHONPATH=${wheels:+$wheels:}$PWD${PYTHONPATH:+:$PYTHONPATH}
    # the wheels' llvmlite must be the one imported (an older one comes with Numba)
    timeout 120 python3 -c 'import sys, lark, llvmlite, numpy, tilelang, tilelang.driver
for m in (llvmlite, lark, numpy, tilelang):
    print(m.__name__, getattr(m, "__version__", "?"), m.__file__)
if sys.argv[1] and not llvmlite.__file__.startswith(sys.argv[1] + "/"):
    sys.exit(f"llvmlite comes from {llvmlite.__file__}, not from the wheels in {sys.argv[1]}")
' "$wheels"
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
    TEST_LIMIT=${TEST_LIMIT:-240}
    gpu_tests pytest-gpu $(( limit - 30 )) "$@"
    ;;
all)
    # the boxes (docs/python-api.md, "A GPU session"): after the environment record, the
    # time left (less 25 s to pack) is shared among the steps still to run in proportion
    # to their weights, so time a step leaves unused passes to all the later ones and a
    # hanging step takes only its own share; pytest skips the tests that would start in the
    # last 15 s of its share, so its junit XML is always written. At 540 s the shares start
    # at about 200 s for the tests, 85 each for matmul and attention, 70 memory, 30 launch.
    # Estimates for an H200 (not measured yet): pytest -m gpu is some 215 tests, compiles
    # dominate (the emulator's own share of the dry run, e.g. 43 s of test_spin_lock, is
    # GPU time there), 100-200 s; matmul compiles Tile and Triton twice each (f16, bf16)
    # and times 8 sizes x 3 implementations x 40 runs of at most ~2 ms (8192^3), ~30 s;
    # attention compiles 8 Tile tiles (2 per D x causal) and 4 Triton kernels, ~50 s;
    # memory some 15 Tile and 15 Triton row kernels at 5 widths, ~60 s; launch ~15 s
    TEST_LIMIT=${TEST_LIMIT:-60}
    at=$(( $(date +%s) - start ))
    until_ env-record $(( at + 30 )) python3 tools/gpu_env.py "$work/env.json"
    if command -v nvidia-smi >/dev/null; then
        until_ nvidia-smi $(( at + 45 )) nvidia-smi -q
    else
        echo "absent: nvidia-smi (not on PATH)" >>"$summary"
    fi
    mkdir -p "$work/results"
    weights=(pytest-gpu:40 bench-matmul:17 bench-attention:17 bench-memory:14 bench-launch:6)
    wsum=0; for s in "${weights[@]}"; do wsum=$(( wsum + ${s#*:} )); done
    for s in "${weights[@]}"; do
        name=${s%:*}; w=${s#*:}
        box=$(( ($(left) - 25) * w / wsum )); wsum=$(( wsum - w ))
        at=$(( $(date +%s) - start + box ))
        if [ "$name" = pytest-gpu ]; then
            gpu_tests pytest-gpu "$at"
        else
            until_ "$name" "$at" python3 benchmarks/run.py --only "${name#bench-}" \
                --gpu-only --out-dir "$work/results"
        fi
    done
    for f in "$work"/results/*.md; do [ -f "$f" ] && cp "$f" "$out/$tag-${f##*/}"; done
    [ -f "$work/env.json" ] && cp "$work/env.json" "$out/$tag-env.json"
    [ -f "$work/junit.xml" ] && cp "$work/junit.xml" "$out/$tag-junit.xml"
    [ -f "$work/outcomes.txt" ] && cp "$work/outcomes.txt" "$out/$tag-outcomes.txt"
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
