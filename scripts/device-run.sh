#!/usr/bin/env bash
# Runs on the GPU test machine, from the repository root, with .device/ and .gl/ present (made by
# scripts/device-build.sh). Steps (all by default, or those named after OUTDIR):
#   check      ferry info, unit tests, hello_transfer on every backend, the conformance suite with
#              FERRY_REQUIRE=cpu,vulkan,cuda and Vulkan validation on (the soak apart: see soak)
#   soak       the soak (test_soak.cpp) on cpu, vulkan and cuda for FERRY_SOAK_SECONDS (default
#              20) each, without the validation layer (it leaks), resident memory checked flat
#   sanitize   the conformance suite on CUDA under compute-sanitizer memcheck, racecheck, synccheck
#   bench      ferry bench transfer, ingress, egress, op (every op) and search on cuda and vulkan
#              (tables and JSON; extra arguments from FERRY_BENCH_ARGS for transfer, e.g.
#              --quick, from FERRY_INGRESS_ARGS for ingress, e.g. --quick or --shapes
#              64x224x224x3, from FERRY_EGRESS_ARGS for egress, e.g. --settings copy, and from
#              FERRY_OP_ARGS for the ops)
#   bench-transfer, bench-ingress, bench-egress, bench-op, bench-search, bench-ibp   one of them
#              only (bench-ibp: ferry bench ibp, arguments from FERRY_IBP_ARGS)
#   trace      the transfer (64K, 16M, 256M), ingress (64x224x224x3) and egress (compute-bound)
#              benches on cuda and on vulkan with --trace, each trace summarized by
#              tools/trace/report.py (docs/TRACES.md); traces and reports in traces.tar.gz
#   vulkan-copies  the Vulkan transfer bench (16M, 256M) under each way of placing and running
#              its copies (FERRY_VULKAN_QUEUES, FERRY_VULKAN_COPIES), and the ingress and egress
#              benches under the shader's, traced; ratio lines in the summary per variant
#   vulkan-queues  the Vulkan ingress and compute-bound egress benches with queues placed
#              elsewhere (FERRY_VULKAN_QUEUES) and with the copy shader
#   trace-cost  the transfer bench (64K, 16M) twice without and twice with --trace per backend
#   cpu-profile  the transfer bench at 64K under perf per backend (logs/perf-<backend>.txt), where
#              perf exists
#   vulkan-gap  issue 15's rows: the transfer bench (64K, 16M, 256M; host-memory origins at 256M;
#              per-call CPU cost) on cuda and vulkan, off and on --trace, then the ingress
#              (64x224x224x3) and compute-bound egress benches, FERRY_GAP_ROUNDS rounds (2)
#   conformance-copies  the transfer and pipeline conformance cases on Vulkan with the copy
#              shader on compute-family upload and download queues, validation on
#   sanitize-copies  memcheck of the transfer, pipeline and trace cases on CUDA (a short sanitize)
#   multi      for several GPUs: ferry info, the multi-device and placement conformance cases
#              under memcheck on CUDA, and ferry bench multi on cuda (bench-multi-cuda.txt),
#              with the full-size search filling FERRY_FILL percent (default 80) of each GPU
#   multi-vulkan  ferry bench multi on vulkan, the same way (bench-multi-vulkan.txt)
#   staging-stores  the default host stores (auto) against FERRY_HOST_STORES=cached and =streaming:
#              ferry bench transfer (16M, 256M, 1G), ingress (64x224x224x3) and, with two GPUs
#              or more, a short ferry bench multi (2 devices) on cuda and vulkan
#              (stores-<bench>-<backend>-<stores>.log; the ratio and peer lines in the summary;
#              FERRY_STORES="auto cached" runs fewer variants)
#   multi-trace  a short ferry bench multi on cuda with every device traced (FERRY_TRACE), to
#              see the host-staged copy between devices (multi-trace.json.gz and its report)
#   python     the Python module: the wheel in .device/wheels installed into the machine's Python
#              environment (with its PyTorch, CuPy and NumPy), its pytest suite with
#              FERRY_REQUIRE=cpu,vulkan,cuda (the CUDA interop tests included), then the CUDA
#              interop tests under compute-sanitizer memcheck
#   python-proof  python/benchmarks/torch_loop.py: a PyTorch ingress and egress loop the usual
#              ways and through ferry (torch_loop.txt and .json; FERRY_PROOF_ARGS, e.g. --quick)
# Logs go to OUTDIR/logs.tar.gz, a summary to OUTDIR/summary.txt (with the benchmarks' "ratio"
# lines), benchmark output beside them (few files: the device tool returns at most 8):
# bench-<backend>.txt holds the transfer, ingress, egress and op tables, bench-<backend>.json the
# transfer JSON, and bench-ingress.tar.gz bench-ingress-<backend>.txt and .json and
# bench-egress-<backend>.txt and .json.
set -uo pipefail
out=${1:?usage: scripts/device-run.sh OUTDIR [STEP...] (steps: see the top of this script)}
shift
steps=${*:-check soak sanitize bench}
mkdir -p "$out/logs"
bin=.device/bin
[ -f .device/bin.tar.xz ] && tar xJf .device/bin.tar.xz -C .device  # device-build.sh packed it

for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd

# Rows of 256-bit codes that fill FERRY_FILL percent (default 80) of the smallest GPU, in whole
# blocks of 16M rows (bench multi's full-size search).
fill_rows() {
  local mib
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | sort -n | head -n 1)
  echo $(( mib * 1048576 / 100 * ${FERRY_FILL:-80} / 32 / 16000000 * 16000000 ))
}

failed=0
step() {  # step NAME COMMAND...: runs it, logs to logs/NAME.log, one summary line
  local name=$1; shift
  local start=$SECONDS started
  started=$(date -u +%T)
  "$@" >"$out/logs/$name.log" 2>&1
  local rc=$?
  printf '%s %-22s rc=%-3s %4ss  %s\n' "$started" "$name" "$rc" "$((SECONDS - start))" \
    "$(grep -E 'test cases:|ERROR SUMMARY|round trip' "$out/logs/$name.log" | tail -n 1)" | tee -a "$out/summary.txt"
  [ "$rc" -eq 0 ] || failed=1
}

# The transfer, ingress and egress benches on backend $1 with --trace, named $2, with the
# environment settings after them; each trace summarized by tools/trace/report.py, then
# gzipped (traces.tar.gz); ratio lines to the summary.
traced_benches() {
  local b=$1 name=$2 t
  shift 2
  step "trace-transfer-$name" env "$@" "$bin/ferry" bench transfer --backend "$b" --sizes 64K,16M,256M \
    --min-time-ms 100 --trace "$out/traces/transfer-$name.json"
  step "trace-ingress-$name" env "$@" "$bin/ferry" bench ingress --backend "$b" --shapes 64x224x224x3 \
    --min-time-ms 300 --trace "$out/traces/ingress-$name.json"
  step "trace-egress-$name" env "$@" "$bin/ferry" bench egress --backend "$b" --settings compute \
    --steps 20 --trace "$out/traces/egress-$name.json"
  mkdir -p "$out/reports"
  for kind in transfer ingress egress; do
    grep -E '^  ratio  ' "$out/logs/trace-$kind-$name.log" | sed "s/^  ratio/  $name ratio/" >>"$out/summary.txt"
    t="$out/traces/$kind-$name.json"
    [ -f "$t" ] || continue
    python3 tools/trace/report.py "$t" >"$out/reports/$kind-$name.txt" 2>&1
    # The transfer traces are large (thousands of small submissions): their reports only.
    if [ "$kind" = transfer ]; then rm -f "$t"; else gzip -f "$t"; fi
  done
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } >"$out/summary.txt" 2>&1
# The GPUs' clocks, power state and PCIe link every 200 ms (logs/gpu-state.csv), to tell a slow
# phase of a bench from the device changing state under it.
nvidia-smi --query-gpu=timestamp,index,pstate,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,power.draw,utilization.gpu,temperature.gpu \
  --format=csv -lms 200 >"$out/logs/gpu-state.csv" 2>&1 &
sampler=$!
for s in $steps; do
  case $s in
    check)
      step info "$bin/ferry" info
      step unit "$bin/ferry_unit_tests"
      for b in cpu vulkan cuda; do step "hello-$b" env FERRY_VALIDATION=1 "$bin/hello_transfer" "$b"; done
      for b in vulkan cuda; do  # contact sheets land in the logs tarball
        step "image-ingest-$b" env FERRY_VALIDATION=1 "$bin/image_ingest" --backend "$b" \
          --images samples/image_ingest/images --out "$out/logs/image-ingest-$b"
        step "egress-sample-$b" env FERRY_VALIDATION=1 "$bin/egress_pipeline" --backend "$b" \
          --steps 12 --mib 64 --out "$out/egress-sample-$b"
        rm -rf "$out/egress-sample-$b"
      done
      step conformance env FERRY_REQUIRE=cpu,vulkan,cuda FERRY_VALIDATION=1 "$bin/ferry_conformance" \
        --test-case-exclude='soak*'
      # hamming_topk's popcount path, which the GPU's tensor-core path otherwise hides
      step conformance-cuda-popcount env FERRY_BACKENDS=cuda FERRY_REQUIRE=cuda \
        FERRY_CUDA_HIDE_FEATURES=b1mma "$bin/ferry_conformance" --test-case='hamming*'
      # hamming_topk's CUDA buffered scan forced where the pooled search runs by default (the
      # default run above is the pooled one), the pooled search's exact pass for every query
      # (pooled-exact: pools that hold nothing), and its plain scan (pooled-plain: the tests'
      # databases fit the L2 cache, where the staged scan runs)
      for scan in buffered pooled-exact pooled-plain; do
        step "conformance-cuda-$scan" env FERRY_BACKENDS=cuda FERRY_REQUIRE=cuda \
          FERRY_CUDA_HAMMING_SCAN=$scan "$bin/ferry_conformance" --test-case='hamming*,BinaryIndex*'
      done
      # hamming_topk's Vulkan buffered scan forced where the pooled search runs by default, the
      # pooled search's exact pass for every query, as on CUDA, and the pooled search without
      # cooperative matrices (portable: the default fills the pools with them where offered)
      for scan in buffered pooled-exact portable; do
        step "conformance-vulkan-$scan" env FERRY_BACKENDS=vulkan FERRY_REQUIRE=vulkan \
          FERRY_VALIDATION=1 FERRY_VULKAN_HAMMING_SCAN=$scan "$bin/ferry_conformance" \
          --test-case='hamming*,BinaryIndex*'
      done
      # hamming_topk's Vulkan cooperative-matrix scan, which runs only when asked for
      step conformance-vulkan-coopmat env FERRY_BACKENDS=vulkan FERRY_REQUIRE=vulkan \
        FERRY_VALIDATION=1 FERRY_VULKAN_HAMMING_SCAN=coopmat \
        "$bin/ferry_conformance" --test-case='hamming*'
      ;;
    multi)
      # Several GPUs of one host: the multi-device cases (ShardedIndex, copies between
      # devices, device placement; they open every GPU of the backend) under memcheck on CUDA,
      # and ferry bench multi on cuda (FERRY_MULTI_ARGS added)
      nvidia-smi topo -m >"$out/logs/topology.txt" 2>&1
      step info "$bin/ferry" info
      step sanitize-multi env FERRY_BACKENDS=cpu,cuda FERRY_REQUIRE=cpu,cuda \
        compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/ferry_conformance" \
        --test-case='ShardedIndex*,peer copies*,device info*,host placement*'
      step bench-multi-cuda "$bin/ferry" bench multi --backend cuda --fill-rows "$(fill_rows)" \
        ${FERRY_MULTI_ARGS:-}
      cp "$out/logs/bench-multi-cuda.log" "$out/bench-multi-cuda.txt"
      grep -h "ratio" "$out"/bench-multi-cuda.txt >>"$out/summary.txt"
      ;;
    multi-trace)
      step multi-trace env FERRY_TRACE="$out/multi-trace.json" "$bin/ferry" bench multi \
        --backend cuda --devices 2 --bytes 256M --copies 2 --rows 1000 --min-time-ms 200
      python3 tools/trace/report.py "$out/multi-trace.json" >"$out/multi-trace-report.txt" 2>&1
      gzip -f "$out/multi-trace.json"
      ;;
    staging-stores)
      gpus=$(nvidia-smi -L | wc -l)
      for b in cuda vulkan; do
        for stores in ${FERRY_STORES:-auto cached streaming}; do
          step "stores-transfer-$b-$stores" env FERRY_HOST_STORES=$stores "$bin/ferry" bench transfer \
            --backend "$b" --sizes 16M,256M,1G --min-time-ms 300
          step "stores-ingress-$b-$stores" env FERRY_HOST_STORES=$stores "$bin/ferry" bench ingress \
            --backend "$b" --shapes 64x224x224x3 --min-time-ms 300
          grep -hE '^  ratio  ' "$out/logs/stores-transfer-$b-$stores.log" \
            "$out/logs/stores-ingress-$b-$stores.log" | sed "s/^  ratio/  $b $stores ratio/" >>"$out/summary.txt"
          [ "$gpus" -ge 2 ] || continue
          step "stores-multi-$b-$stores" env FERRY_HOST_STORES=$stores "$bin/ferry" bench multi \
            --backend "$b" --devices 2 --copies 4 --rows 1000 --min-time-ms 300
          grep -E '^  host_staged  |H2D, device 1|D2H, device 0' "$out/logs/stores-multi-$b-$stores.log" |
            sed "s/^/  $b $stores /" >>"$out/summary.txt"
        done
      done
      ;;
    multi-vulkan)
      # Vulkan searches fewer rows and full-size queries: its scan is about 8x slower
      step bench-multi-vulkan "$bin/ferry" bench multi --backend vulkan --rows 25000000 \
        --fill-rows "$(fill_rows)" --fill-queries 100 ${FERRY_MULTI_ARGS:-}
      cp "$out/logs/bench-multi-vulkan.log" "$out/bench-multi-vulkan.txt"
      grep -h "ratio" "$out"/bench-multi-vulkan.txt >>"$out/summary.txt"
      ;;
    soak)
      step soak env FERRY_REQUIRE=cpu,vulkan,cuda FERRY_SOAK_SECONDS="${FERRY_SOAK_SECONDS:-20}" \
        "$bin/ferry_conformance" --test-case='soak*'
      grep -h 'soak on' "$out/logs/soak.log" | sed 's/^.*MESSAGE: /  /' >>"$out/summary.txt"
      ;;
    sanitize)
      # API errors are not reported: the bad-input tests provoke some on purpose (a 2^62-byte
      # cudaMalloc), and ferry checks every CUDA result itself, so an unexpected one fails a test.
      for tool in memcheck racecheck synccheck; do
        step "sanitize-$tool" env FERRY_BACKENDS=cuda FERRY_REQUIRE=cuda \
          compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 \
          "$bin/ferry_conformance" --test-case-exclude='soak*'
      done
      ;;
    bench|bench-transfer|bench-ingress|bench-egress|bench-op|bench-search|bench-ibp)
      for b in cuda vulkan; do
        if [ "$s" = bench ] || [ "$s" = bench-transfer ]; then
          step "bench-$b" "$bin/ferry" bench transfer --backend "$b" \
            --json-file "$out/bench-$b.json" ${FERRY_BENCH_ARGS:-}
          cp "$out/logs/bench-$b.log" "$out/bench-$b.txt"
          grep -E '^  ratio  ' "$out/bench-$b.txt" | sed "s/^  ratio/  $b ratio/" >>"$out/summary.txt"
        fi
        # ingress and egress: text appended to bench-<backend>.txt, text and JSON into the one
        # tarball, their "ratio" summary lines into the summary
        for kind in ingress egress; do
          [ "$s" = bench ] || [ "$s" = "bench-$kind" ] || continue
          mkdir -p "$out/pipelines"
          args_var=FERRY_${kind^^}_ARGS
          step "bench-$kind-$b" "$bin/ferry" bench "$kind" --backend "$b" \
            --json-file "$out/pipelines/bench-$kind-$b.json" ${!args_var:-}
          cp "$out/logs/bench-$kind-$b.log" "$out/pipelines/bench-$kind-$b.txt"
          { echo; cat "$out/pipelines/bench-$kind-$b.txt"; } >>"$out/bench-$b.txt"
          grep -E '^  ratio  ' "$out/pipelines/bench-$kind-$b.txt" |
            sed "s/^  ratio/  $b ratio/" >>"$out/summary.txt"
        done
        # every op against a device-to-device copy: text appended, ratio lines into the summary
        if [ "$s" = bench ] || [ "$s" = bench-op ]; then
          # the ops, from the one op list (as cmake/FerryOps.cmake reads it)
          for op in $(grep -oE '^  X\([a-z0-9_]+' runtime/src/ops/op_list.hpp | sed 's/.*(//'); do
            step "bench-op-$op-$b" "$bin/ferry" bench op "$op" --backend "$b" ${FERRY_OP_ARGS:-}
            { echo; cat "$out/logs/bench-op-$op-$b.log"; } >>"$out/bench-$b.txt"
            grep -E '^  ratio  ' "$out/logs/bench-op-$op-$b.log" |
              sed "s/^  ratio/  $b ratio/" >>"$out/summary.txt"
          done
        fi
        # the search with its baselines and every sweep: text appended, ratio lines likewise
        if [ "$s" = bench ] || [ "$s" = bench-search ]; then
          step "bench-search-$b" "$bin/ferry" bench search --backend "$b" --sweeps all \
            ${FERRY_SEARCH_ARGS:-}
          { echo; cat "$out/logs/bench-search-$b.log"; } >>"$out/bench-$b.txt"
          grep -E '^  ratio  ' "$out/logs/bench-search-$b.log" |
            sed "s/^  ratio/  $b ratio/" >>"$out/summary.txt"
        fi
        # the IBP codec: ratios, encode, decode, compressed uploads; text appended
        if [ "$s" = bench ] || [ "$s" = bench-ibp ]; then
          step "bench-ibp-$b" "$bin/ferry" bench ibp --backend "$b" ${FERRY_IBP_ARGS:-}
          { echo; cat "$out/logs/bench-ibp-$b.log"; } >>"$out/bench-$b.txt"
          grep -E '^  ibp ' "$out/logs/bench-ibp-$b.log" | sed "s/^  ibp/  $b ibp/" >>"$out/summary.txt"
        fi
      done
      ;;
    trace)
      mkdir -p "$out/traces"
      for b in cuda vulkan; do
        traced_benches "$b" "$b"
      done
      ;;
    vulkan-copies)
      mkdir -p "$out/traces"
      # name|settings: where ferry's upload and download queues are (family.index; compute
      # stays on 0.0) and who runs their host<->device copies.
      for variant in \
          "engine-1.0-1.1|FERRY_VULKAN_COPIES=engine" \
          "engine-2.0-2.1|FERRY_VULKAN_COPIES=engine FERRY_VULKAN_QUEUES=upload=2.0,download=2.1" \
          "shader-2.0-2.1|FERRY_VULKAN_COPIES=shader FERRY_VULKAN_QUEUES=upload=2.0,download=2.1" \
          "shader-up-2.0-engine-down-1.0|FERRY_VULKAN_COPIES=shader FERRY_VULKAN_QUEUES=upload=2.0,download=1.0" \
          "engine-up-1.0-shader-down-2.0|FERRY_VULKAN_COPIES=shader FERRY_VULKAN_QUEUES=upload=1.0,download=2.0" \
          "shader-g32-2.0-2.1|FERRY_VULKAN_COPIES=shader,groups=32 FERRY_VULKAN_QUEUES=upload=2.0,download=2.1" \
          "shader-g528-2.0-2.1|FERRY_VULKAN_COPIES=shader,groups=528 FERRY_VULKAN_QUEUES=upload=2.0,download=2.1"; do
        name=${variant%%|*}
        step "copies-$name" env ${variant#*|} "$bin/ferry" bench transfer --backend vulkan \
          --sizes 64K,16M,256M --min-time-ms 100
        grep -E '^  ratio  ' "$out/logs/copies-$name.log" | sed "s/^  ratio/  $name ratio/" >>"$out/summary.txt"
      done
      traced_benches vulkan vulkan-shader FERRY_VULKAN_COPIES=shader \
        FERRY_VULKAN_QUEUES=upload=2.0,download=2.1
      ;;
    vulkan-queues)
      # The compute-bound egress and the ingress with the Vulkan queues placed elsewhere: fills on
      # the compute-only family 2, downloads from a family-2 queue, and the copy shader with 32
      # workgroups (the best of vulkan-copies for both directions at once).
      for variant in \
          "default|FERRY_VULKAN_COPIES=engine" \
          "compute-2.0|FERRY_VULKAN_QUEUES=compute=2.0" \
          "download-2.1|FERRY_VULKAN_QUEUES=download=2.1" \
          "shader-g32|FERRY_VULKAN_COPIES=shader,groups=32 FERRY_VULKAN_QUEUES=upload=2.0,download=2.1"; do
        name=${variant%%|*}
        for kind in ingress egress; do
          args="--shapes 64x224x224x3 --min-time-ms 300"
          [ $kind = egress ] && args="--settings compute --steps 20"
          step "queues-$kind-$name" env ${variant#*|} "$bin/ferry" bench $kind --backend vulkan $args
          grep -E '^  ratio  ' "$out/logs/queues-$kind-$name.log" | sed "s/^  ratio/  $name ratio/" >>"$out/summary.txt"
        done
      done
      ;;
    trace-cost)
      # Tracing's cost on small transfers: the transfer bench twice without and twice with it.
      for b in cuda vulkan; do
        for round in 1 2; do
          step "trace-cost-$b-off-$round" "$bin/ferry" bench transfer --backend "$b" --sizes 64K,16M \
            --min-time-ms 200
          step "trace-cost-$b-on-$round" "$bin/ferry" bench transfer --backend "$b" --sizes 64K,16M \
            --min-time-ms 200 --trace /tmp/trace-cost.json
        done
      done
      ;;
    vulkan-gap)
      # Issue 15's rows on both backends: the transfer bench (with its host-memory origin table
      # and per-call CPU cost) twice without and twice with --trace, the backends alternating.
      for round in $(seq "${FERRY_GAP_ROUNDS:-2}"); do
        for b in cuda vulkan; do
          for t in off on; do
            trace_args=()
            [ $t = on ] && trace_args=(--trace /tmp/gap-$b.json)
            step "gap-$b-$t-$round" "$bin/ferry" bench transfer --backend "$b" \
              --sizes 64K,16M,256M --origin-size 256M --min-time-ms 100 "${trace_args[@]}"
          done
          step "gap-$b-ingress-$round" "$bin/ferry" bench ingress --backend "$b" \
            --shapes 64x224x224x3 --min-time-ms 300
          step "gap-$b-egress-$round" "$bin/ferry" bench egress --backend "$b" --settings compute \
            --steps 20
          for kind in ingress egress; do
            grep -E '^  ratio  ' "$out/logs/gap-$b-$kind-$round.log" | sed "s/^  ratio/  $b ratio/" >>"$out/summary.txt"
          done
        done
      done
      ;;
    cpu-profile)
      # Where the CPU time of small submissions goes: the transfer bench at 64K under perf (when
      # the machine has it), per backend; the report's top entries in logs/perf-<backend>.txt.
      if command -v perf >/dev/null; then
        for b in cuda vulkan; do
          step "perf-$b" perf record -F 20000 -g -o /tmp/perf-$b.data "$bin/ferry" bench transfer \
            --backend "$b" --sizes 64K --no-origins --min-time-ms 50
          perf report -i /tmp/perf-$b.data --stdio --no-children --percent-limit 0.7 \
            >"$out/logs/perf-$b.txt" 2>&1
        done
      else
        echo "no perf on this machine ($(command -v valgrind gdb ltrace | tr '\n' ' '))" | tee -a "$out/summary.txt"
      fi
      ;;
    conformance-copies)
      step conformance-shader-copies env FERRY_BACKENDS=vulkan FERRY_REQUIRE=vulkan FERRY_VALIDATION=1 \
        FERRY_VULKAN_COPIES=shader FERRY_VULKAN_QUEUES=upload=2.0,download=2.1 "$bin/ferry_conformance" \
        --test-case='pinned round trips*,pageable round trips*,registered host memory*,ingress*,egress*,trace*,copies*,fill then copy*,device-to-device*'
      ;;
    python|python-proof)
      # Into the machine's own Python environment (a venv with PyTorch, CuPy and NumPy; a fresh
      # machine each session), from the carried wheels: there is no network.
      venv=$(dirname "$(dirname "$(command -v python3)")")
      if ! python3 -c 'import ferry' 2>/dev/null; then
        python3 -m pip install -q --no-index --find-links .device/wheels ferry pytest \
          >"$out/logs/python-install.log" 2>&1 || { echo "python: install failed" | tee -a "$out/summary.txt"; failed=1; }
      fi
      if [ "$s" = python ]; then
        step python-tests env FERRY_REQUIRE=cpu,vulkan,cuda FERRY_VALIDATION=1 \
          "$venv/bin/python" -m pytest python/tests -q -rs -p no:cacheprovider
        grep -E '^(FAILED|ERROR|SKIPPED)|passed|failed' "$out/logs/python-tests.log" | tail -n 12 >>"$out/summary.txt"
        # Not the "drop" case: under compute-sanitizer (only) the batch it drops is still
        # referenced from C code for a while (refcount 3, one referrer: the test's frame), so
        # next() finds every tensor held; issue 16's note has what was found.
        step python-memcheck env FERRY_REQUIRE=cpu,cuda FERRY_BACKENDS=cpu,cuda \
          compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
          "$venv/bin/python" -m pytest python/tests/test_cuda_interop.py -q -p no:cacheprovider \
          --deselect "python/tests/test_cuda_interop.py::test_ingress_slot_not_reused_before_torch_is_done[drop]"
      else
        step python-proof "$venv/bin/python" python/benchmarks/torch_loop.py \
          --json "$out/torch_loop.json" ${FERRY_PROOF_ARGS:-}
        cp "$out/logs/python-proof.log" "$out/torch_loop.txt"
      fi
      ;;
    sanitize-copies)
      step sanitize-memcheck-copies env FERRY_BACKENDS=cuda FERRY_REQUIRE=cuda \
        compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
        "$bin/ferry_conformance" --test-case='pinned round trips*,pageable round trips*,ingress*,egress*,trace*'
      ;;
    *) echo "unknown step $s" >&2; failed=1 ;;
  esac
done
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
if [ -d "$out/reports" ]; then
  tar czf "$out/reports.tar.gz" -C "$out" reports && rm -rf "$out/reports"
fi
if [ -d "$out/traces" ]; then
  tar czf "$out/traces.tar.gz" -C "$out" traces && rm -rf "$out/traces"
fi
if [ -d "$out/pipelines" ]; then
  tar czf "$out/bench-ingress.tar.gz" -C "$out/pipelines" . && rm -rf "$out/pipelines"
fi
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$out/logs"
cat "$out/summary.txt"
exit $failed
