#!/usr/bin/env bash
# The GPU rows of benchmarks/README.md, part by part, on a machine with a CUDA GPU and PyTorch, Triton and transformers
# installed (the package is read from this checkout through PYTHONPATH). Each part writes its log into $OUT (default
# gpu-logs/). Parts, in the order to run them when time is short:
#   env         the device, driver, CUDA, torch, triton and transformers versions
#   copy        synchronizations per step, the step variants, the copy task over 8 seeds (graphed, float32, eager), the CLI
#   generation  tokens/s of the course's GPT against transformers' generate at SmolLM2-135M's size, bf16 and float32
#   tests       the test files that run on the GPU where there is one (Triton kernels, devices, CUDA graphs, sampling)
#   triton      chapter 19a's kernels: errors by dtype and mask, attention's time and memory against length
#   step        the base-size step against torch.nn.Transformer, bf16 autocast, eager
#   tune        the Triton forward's launch settings swept, and the faster variant, against the flash backend
#   compile     the base-size step again, both models through torch.compile
#   shakespeare the larger GPT trained for 180 s, scored with full context, sampled (in the background: see notebooks)
#   notebooks   every notebook run on the GPU by tools/run_notebooks.py (needs nbclient, ipykernel and altair: with a
#               folder .whl of wheels, they are installed into /tmp/site first); waits for a background shakespeare
# Usage: bash benchmarks/gpu.sh env generation copy tests triton step tune compile
#        bash benchmarks/gpu.sh shakespeare notebooks
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-logs}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PY:-python3}"
t0=$SECONDS
part() { printf '\n== [%4ds] %s\n' $((SECONDS - t0)) "$*"; }
log() { tee -a "$OUT/$1.log"; }

for p in "$@"; do case $p in
env) part env
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    $PY -c "import sys, torch, triton, transformers; print('Python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda, '| triton', triton.__version__, '| transformers', transformers.__version__, '|', torch.cuda.get_device_name(), '|', torch.get_num_threads(), 'CPU threads')"
  } 2>&1 | log copy ;;
copy) part copy
  { $PY benchmarks/speed.py syncs --device cuda
    $PY benchmarks/speed.py steps --device cuda --rounds 5 --min-run-time 0.2
    $PY benchmarks/copy_task.py --device cuda --fast --seeds 0 1 2 3 4 5 6 7
    $PY benchmarks/copy_task.py --device cuda --fast --fp32 --seeds 0 1 2 3 4 5 6 7
    $PY benchmarks/copy_task.py --device cuda --fast --graphs off --seeds 0 1
    mkdir -p /tmp/bin && printf '#!/bin/sh\nexec %s -m transformer_tutorial.cli "$@"\n' "$PY" > /tmp/bin/transformer-tutorial && chmod +x /tmp/bin/transformer-tutorial
    PATH=/tmp/bin:$PATH $PY benchmarks/speed.py cli --seeds 0 1 2
  } 2>&1 | log copy ;;
generation) part generation
  { $PY benchmarks/generation.py --device cuda --dtype bfloat16 --rounds 5
    $PY benchmarks/generation.py --device cuda --dtype float32 --rounds 3
  } 2>&1 | log generation ;;
tests) part tests
  $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_flash_triton.py tests/test_flash.py tests/test_devices.py 2>&1 | tail -40 | log tests ;;
triton) part triton
  { $PY benchmarks/flash_triton_gpu.py --part errors
    $PY benchmarks/flash_attention.py --device cuda
  } 2>&1 | log triton ;;
step) part step
  $PY benchmarks/step_vs_torch.py --device cuda --sizes base --dtype bfloat16 2>&1 | log step ;;
tune) part tune
  $PY benchmarks/flash_triton_gpu.py --part tune 2>&1 | log triton ;;
compile) part compile
  $PY benchmarks/step_vs_torch.py --device cuda --sizes base --dtype bfloat16 --compile --rounds 5 2>&1 | log step ;;
shakespeare) part "shakespeare (background)"
  $PY benchmarks/shakespeare.py --part budget --device cuda --seconds 180 > "$OUT/shakespeare.log" 2>&1 &
  SHAKESPEARE=$! ;;
notebooks) part notebooks
  if [ -d .whl ]; then $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
    export PYTHONPATH="/tmp/site:$PYTHONPATH"; fi
  mkdir -p /tmp/bin && printf '#!/bin/sh\nexec %s -m transformer_tutorial.cli "$@"\n' "$PY" > /tmp/bin/transformer-tutorial && chmod +x /tmp/bin/transformer-tutorial
  PATH=/tmp/bin:$PATH $PY tools/run_notebooks.py --workers "${WORKERS:-6}" --timeout 240 nbs/index.ipynb $(ls nbs/[0-9]*.ipynb nbs/exercises/*.ipynb) 2>&1 | log notebooks
  if [ -n "${SHAKESPEARE:-}" ]; then wait "$SHAKESPEARE"; fi ;;
*) echo "unknown part $p" >&2; exit 2 ;;
esac; done
if [ -n "${SHAKESPEARE:-}" ]; then wait "$SHAKESPEARE"; fi
part done
