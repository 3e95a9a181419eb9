#!/usr/bin/env bash
# The encoder on the device machine (../shared/GPU.md), one command: a MiniLM-shaped checkpoint
# with seeded random weights written there (the device tool carries ≤ 64 MiB, the real weights
# are 87 MiB; speed does not depend on values), then
#   1. correctness: our embeddings of test/encoder/corpus.jsonl vs PyTorch's on that checkpoint;
#   2. speed: nx-vulkan encode-bench (Rust) and bench/encoder_bench.exs (Elixir) vs
#      bench/encoder/torch_encoder.py, same shapes and texts, same GPU;
#   3. cold start: process start to first embedding, ours (empty and warm caches) and torch's.
# Carried: .gl (loader + BEAM), .gpubin (nx-vulkan, minilm-tok/ with the real model's tokenizer
# and module files), .gpubeam (ERL_LIBS: nx_vulkan with its NIF). Results under $OUT.
set -uo pipefail
source .gl/env.sh
out=${OUT:-bench/out}; mkdir -p "$out"
model=/tmp/random-minilm
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpubin/minilm-tok --out $model --seed 0 > "$out/model.log" 2>&1
nxv=.gpubin/nx-vulkan
cache=$(mktemp -d)
export NX_VULKAN_CACHE_DIR=$cache HF_HUB_OFFLINE=1

# 3 (first, while our cache is empty): process start to first embedding, one input
echo '"a first sentence to embed"' > /tmp/one.jsonl
for state in cold warm warm; do
  t0=$(date +%s%N)
  $nxv encode --model $model --input /tmp/one.jsonl > /dev/null 2>> "$out/cold.err"
  t1=$(date +%s%N)
  echo "{\"peer\":\"nx_vulkan\",\"bench\":\"cold_start\",\"cache\":\"$state\",\"first_embedding_ms\":$(( (t1 - t0) / 1000000 ))}"
done > "$out/cold.jsonl"

# 1. correctness on the corpus (fp32 within 1e-4 of torch fp32; the half modes reported)
python3 bench/encoder/torch_encoder.py --model $model --reference "$out/torch-fp32.bin" --texts test/encoder/corpus.jsonl > "$out/torch-ref.jsonl" 2> "$out/torch-ref.err"
for p in fp32 compensated fp16 bf16; do
  $nxv encode --model $model --precision $p --batch 8 --input test/encoder/corpus.jsonl > "$out/ours-$p.jsonl" 2>> "$out/encode.err"
  python3 bench/encoder/compare.py "$out/torch-fp32.bin" "$out/ours-$p.jsonl" --label "$p vs torch fp32"
done > "$out/compare.jsonl"
# the same bits at batch 1 as at batch 8 (and, for the long-input kernels, at 64)
for b in 1 64; do
  $nxv encode --model $model --batch $b --input test/encoder/corpus.jsonl > "$out/ours-fp32-b$b.jsonl" 2>> "$out/encode.err"
  python3 -c "import json,sys; a=[json.loads(l)['embedding'] for l in open(sys.argv[1])]; b=[json.loads(l)['embedding'] for l in open(sys.argv[2])]; print(json.dumps({'bench':'batch_invariance','batches':[8,$b],'n':len(a),'identical_rows':sum(x==y for x,y in zip(a,b))}))" "$out/ours-fp32.jsonl" "$out/ours-fp32-b$b.jsonl" >> "$out/compare.jsonl"
done

# 2. speed
$nxv encode-bench --model $model --precisions fp32,compensated,fp16,bf16 --reps "${REPS:-30}" > "$out/ours.jsonl" 2> "$out/ours.err"
$nxv encode-bench --model $model --precisions fp32 --shapes 1x32 --reps 10 --profile > "$out/profile.jsonl" 2>&1
ERL_LIBS=$PWD/.gpubeam elixir bench/encoder_bench.exs $model fp32,fp16 1x32,2x32,4x32,8x32,64x128 "${REPS:-30}" > "$out/elixir.jsonl" 2> "$out/elixir.err"
python3 bench/encoder/torch_encoder.py --model $model --precisions fp32,fp16 --reps "${REPS:-30}" > "$out/torch.jsonl" 2> "$out/torch.err"
# one results file (the device tool brings back only a few files)
cat "$out/cold.jsonl" "$out/compare.jsonl" "$out/ours.jsonl" "$out/elixir.jsonl" "$out/torch.jsonl" "$out/profile.jsonl" > "$out/results.jsonl"
rm -f "$out"/ours-*.jsonl "$out"/torch-fp32.bin* "$out"/{cold,compare,ours,elixir,torch,torch-ref}.jsonl "$out/model.log"
cat "$out/results.jsonl" | grep -v '"profile"' | cut -c1-400
grep -h '"profile"' "$out/profile.jsonl" | head -12; rm -f "$out/profile.jsonl"
