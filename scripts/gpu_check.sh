#!/usr/bin/env bash
# One prepared GPU check: CUDA tests of the Warp kernels, GPU benchmarks, Newton on CUDA. Never stops early.
#
# On the device machine (repo root; wheels staged in .whl/, shared assets copied to shared_assets/):
#     bash scripts/gpu_check.sh
# Logs go to $OUT (default /tmp/gpu_check_out): env.log, install.log, cuda_tests.log, bench_skinning.log,
# bench_render.log, newton_cuda.log, summary.txt (7 files). Every step prints its exit status; the script's own
# status is 0 when every step passed.
#
# Knobs (environment):
#     SKIP_INSTALL=1        use $PYTHON (default .venv/bin/python) instead of installing .whl/*.whl for python3
#     WHEEL_DIR             where the wheels are (default .whl); without wheels there, /tmp/site is used as it is
#                           (e.g. warp installed there by an earlier call)
#     SITE_DIR              pip --target folder, first on PYTHONPATH (default /tmp/site)
#     GPU_CHECK_DEVICE=cpu  run the same steps on CPU (tests with KINEDISTILL_TEST_DEVICE=cpu, small benchmarks):
#                           a local dry run of this script
#     GPU_CHECK_BUDGET_S    wall-clock budget of the whole script [s] (default 420); each step's timeout is capped
#                           by what is left, and a step with under 20 s left is skipped
set -u
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-420}
DEV=${GPU_CHECK_DEVICE:-cuda}
WHEEL_DIR=${WHEEL_DIR:-$REPO/.whl}
SITE_DIR=${SITE_DIR:-/tmp/site}
OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export WARP_CACHE_PATH=${WARP_CACHE_PATH:-/tmp/wc}
export KINEDISTILL_ASSETS=${KINEDISTILL_ASSETS:-$REPO/shared_assets}
export KINEDISTILL_TEST_DEVICE=$DEV
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
FAILED=0

left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME MAX_SECONDS LOG COMMAND...: runs COMMAND under `timeout`, tee'd to LOG; records its exit status
step() {
    local name=$1 max=$2 log=$3
    shift 3
    local remaining limit rc t0
    remaining=$(left)
    limit=$((max < remaining ? max : remaining))
    if [ "$limit" -lt 20 ]; then
        echo "=== $name: SKIPPED (only ${remaining}s of the ${BUDGET}s budget left)" | tee -a "$log"
        echo "$name rc=skipped" >>"$SUMMARY"
        FAILED=1
        return
    fi
    echo "=== $name (timeout ${limit}s, $((BUDGET - remaining))s elapsed): $*" | tee -a "$log"
    t0=$(date +%s)
    set -o pipefail
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
    rc=$?
    set +o pipefail
    echo "=== $name: rc=$rc in $(($(date +%s) - t0))s" | tee -a "$log"
    echo "$name rc=$rc ($(($(date +%s) - t0))s)" >>"$SUMMARY"
    [ "$rc" -eq 0 ] || FAILED=1
}

{
    echo "gpu_check: $(date -u +%FT%TZ) host $(uname -n) $(uname -m), device $DEV, budget ${BUDGET}s, repo $REPO"
    echo "WARP_CACHE_PATH=$WARP_CACHE_PATH KINEDISTILL_ASSETS=$KINEDISTILL_ASSETS OUT=$OUT"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu,clocks.max.sm \
            --format=csv 2>&1
        nvidia-smi 2>&1 | head -n 12
    else
        echo "nvidia-smi: not found"
    fi
    [ -d "$KINEDISTILL_ASSETS" ] && ls "$KINEDISTILL_ASSETS" || echo "no assets at $KINEDISTILL_ASSETS"
} 2>&1 | tee "$OUT/env.log"

if [ "${SKIP_INSTALL:-0}" = 1 ]; then
    PY=${PYTHON:-$REPO/.venv/bin/python}
    export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
    echo "SKIP_INSTALL=1: using $PY" | tee "$OUT/install.log"
    echo "install rc=skipped" >>"$SUMMARY"
else
    PY=${PYTHON:-python3}
    WHEELS=("$WHEEL_DIR"/*.whl)
    if [ -e "${WHEELS[0]}" ]; then
        step install 180 "$OUT/install.log" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target "$SITE_DIR" "${WHEELS[@]}"
    else
        echo "no wheels in $WHEEL_DIR: using what $SITE_DIR already holds ($(ls "$SITE_DIR" 2>/dev/null | tr '\n' ' '))" \
            | tee "$OUT/install.log"
        echo "install rc=skipped (no wheels)" >>"$SUMMARY"
    fi
    export PYTHONPATH=$SITE_DIR:$REPO${PYTHONPATH:+:$PYTHONPATH}
fi

step versions 60 "$OUT/env.log" "$PY" -c '
import sys, numpy, torch
import warp as wp
wp.config.quiet = True
wp.init()
print("python", sys.version.split()[0], "numpy", numpy.__version__)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("warp", wp.__version__, "cuda devices", wp.get_cuda_device_count(), "driver", wp.get_cuda_driver_version(),
      "toolkit", wp.get_cuda_toolkit_version())
for d in wp.get_cuda_devices():
    attrs = ("name", "arch", "is_mempool_enabled", "is_cpu_memory_access_from_gpu_supported")
    print(" ", d, {a: getattr(d, a, "?") for a in attrs}, "output", d.get_cuda_output_format())
try:
    import newton
    print("newton", newton.__version__)
except Exception as e:
    print("newton import failed:", type(e).__name__, e)
import sim, distill, posespace, usd_io
print("kinedistill packages import from", sim.__file__.rsplit("/", 2)[0])
'

if [ "$DEV" = cpu ]; then
    SKIN_ARGS=(--cases small --repeats 1)
    RENDER_ARGS=(--resolutions 64 --views 1 --repeats 1)
    RENDER_WIDE_ARGS=(--resolutions 64 --views 2 --repeats 1)
else
    SKIN_ARGS=(--cases small,medium,large,xlarge --repeats 5)
    RENDER_ARGS=(--resolutions 64,256 --views 4 --repeats 5)
    RENDER_WIDE_ARGS=(--resolutions 256 --views 16 --repeats 3)
fi

PYTEST=("$PY" -m pytest -q -s -rs -p no:cacheprovider --durations=12 tests/test_cuda.py)
step cuda_tests 200 "$OUT/cuda_tests.log" "${PYTEST[@]}" -k "not newton"
step bench_skinning 80 "$OUT/bench_skinning.log" "$PY" benchmarks/bench_skinning.py --device "$DEV" "${SKIN_ARGS[@]}"
step bench_render 80 "$OUT/bench_render.log" "$PY" benchmarks/bench_render.py --device "$DEV" "${RENDER_ARGS[@]}"
step bench_render_16views 45 "$OUT/bench_render.log" "$PY" benchmarks/bench_render.py --device "$DEV" \
    "${RENDER_WIDE_ARGS[@]}"
step newton_cuda 150 "$OUT/newton_cuda.log" "${PYTEST[@]}" -k newton

{
    echo "--- test outcomes"
    grep -hE "^(FAILED|ERROR|SKIPPED)|passed|failed|error" "$OUT/cuda_tests.log" "$OUT/newton_cuda.log" 2>/dev/null \
        | grep -v "^\[" | tail -n 40
    echo "--- total $(($(date +%s) - START))s of ${BUDGET}s; overall $([ $FAILED = 0 ] && echo PASS || echo FAIL)"
} >>"$SUMMARY"
echo
echo "===== summary ($SUMMARY)"
cat "$SUMMARY"
exit $FAILED
