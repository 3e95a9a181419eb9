#!/usr/bin/env bash
# Stop 44, run 1 (one command): how many workgroups an NVIDIA GPU keeps resident per
# multiprocessor for each workgroup size and shared-memory footprint (`nx-vulkan
# probe-shared`: a latency-bound kernel, device time of the full grid over one workgroup's),
# then stop 43's prepared sweep (scan positions, encoder projection K step, the f16 GEMM's
# variants). Carry .gl, .gpurun/s44, .gpurun/minilm-tok.
export BIN=${BIN:-.gpurun/s44}
source bench/results/2026-12-06-stop43/common.sh
# (Python before .gl/env.sh, as every run: the prepared script writes its model first too)
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpurun/minilm-tok --out /tmp/random-minilm --seed 0 > "$OUT/model0.log" 2>&1
source .gl/env.sh
unpack nx-vulkan
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
timeout 120 /tmp/t/nx-vulkan probe-shared 2>"$OUT/probe.err" > "$OUT/probe.jsonl"
cut -c1-200 "$OUT/probe.jsonl"; tail -3 "$OUT/probe.err"
timeout 120 /tmp/t/nx-vulkan probe-stream 2>>"$OUT/probe.err" > "$OUT/stream.jsonl"
cut -c1-200 "$OUT/stream.jsonl"
# the decode matvec on the same bytes (8B FFN shapes, Q4_K, one token; 4 distinct copies so
# the weights stream from memory, 50 products per submission with a decode step's barriers)
timeout 120 /tmp/t/nx-vulkan llm-gemm-bench --rows 1 --matvec-only --one-batch --calls 50 --distinct 4 --profile 2>>"$OUT/probe.err" > "$OUT/matvec.jsonl"
cut -c1-240 "$OUT/matvec.jsonl"
echo "probes done at $SECONDS s"
bash bench/results/2026-12-06-stop43-prepared/run1.sh
