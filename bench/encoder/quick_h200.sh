source .gl/env.sh
python3 bench/encoder/make_random_bert.py --tokenizer-dir .gpubin/minilm-tok --out /tmp/rm --seed 0 >/dev/null 2>&1
.gpubin/nx-vulkan encode-bench --model /tmp/rm --precisions fp32,fp16 --reps 20 | cut -c1-330
ERL_LIBS=$PWD/.gpubeam elixir bench/encoder_bench.exs /tmp/rm fp32 1x32,8x32,64x128 20 2>&1 | tail -5
