#!/usr/bin/env bash
# Fuzzes the engine's untrusted-input paths with cargo-fuzz (libFuzzer); not part of CI.
#
#   scripts/fuzz.sh [RUNS] [TARGET...]     RUNS executions per target (default 1000000);
#                                          targets: gguf_parse tokenize (default: both)
#
# Stable Rust only: RUSTC_BOOTSTRAP=1 lets cargo-fuzz's -Z flags through, and no sanitizer is
# used (`-s none`: nightly's ASan runtime is not available) — a crash is a panic, an abort or a
# libFuzzer memory/time limit. Seeds go to a temporary corpus: the fixtures of test/llm/fixtures
# cut down to one block per tensor (the gguf_robust test writes them), and a few texts and id
# lists for the tokenizer. Crash inputs land in native/fuzz/artifacts/TARGET/.
# Needs `cargo install cargo-fuzz`. The first build of native/fuzz takes ~15 min on 2 cores.
set -euo pipefail

runs=${1:-1000000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf_parse tokenize)

root=$(cd "$(dirname "$0")/.." && pwd)
command -v cargo-fuzz >/dev/null || { echo "fuzz.sh: cargo-fuzz not found (cargo install cargo-fuzz)" >&2; exit 2; }
export RUSTC_BOOTSTRAP=1
work=$(mktemp -d "${TMPDIR:-/tmp}/nx-fuzz.XXXXXX")
echo "fuzz.sh: corpora and logs in $work"

mkdir -p "$work/gguf_parse" "$work/tokenize"
(cd "$root/native" && GGUF_FUZZ_SEEDS="$work/gguf_parse" cargo test --release -q -p nx_vulkan_engine --test gguf_robust -- --ignored --exact write_fuzz_seeds >/dev/null)
# tokenize: first byte even = text, odd = little-endian u32 ids.
printf '\x00Hello, world! How are you?' >"$work/tokenize/text"
printf '\x00<|im_start|>user\nWhat is 2+2?<|im_end|>\n' >"$work/tokenize/chat"
printf '\x00  spaces\ttabs\n\nnewlines 12345 \xc3\xbf\xe2\x82\xac\xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87' >"$work/tokenize/unicode"
printf '\x01\x10\x00\x00\x00\x20\x00\x00\x00\x00\x01\x00\x00\xff\xff\xff\xff' >"$work/tokenize/ids"

cd "$root/native/fuzz"
status=0
for t in "${targets[@]}"; do
    case $t in
        gguf_parse) max_len=65536 ;;
        tokenize) max_len=512 ;;
        *) echo "fuzz.sh: unknown target $t" >&2; exit 2 ;;
    esac
    echo "fuzz.sh: $t: $runs runs (log $work/$t.log)"
    rc=0
    cargo fuzz run "$t" -s none --release --codegen-units 16 "$work/$t" -- \
        -runs="$runs" -max_len="$max_len" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
        -print_final_stats=1 >"$work/$t.log" 2>&1 || rc=$?
    done_line=$(grep -E '^Done [0-9]+ runs' "$work/$t.log" || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    if [ "$rc" -eq 0 ] && [ -n "$done_line" ]; then
        echo "fuzz.sh: $t: OK — $done_line, ${execs:-?} executions, no crash"
    else
        status=1
        echo "fuzz.sh: $t: FAILED (exit $rc) after ${execs:-?} executions; last lines:"
        grep -v '^#' "$work/$t.log" | tail -25
        ls "artifacts/$t" 2>/dev/null | sed "s|^|  artifact: native/fuzz/artifacts/$t/|" || true
    fi
done
exit $status
