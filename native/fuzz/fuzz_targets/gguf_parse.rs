//! Arbitrary bytes as a GGUF file: `Gguf::from_bytes`, then the config, every tensor's bytes and
//! a few dequantized blocks of each (the checks `tests/gguf_robust.rs` runs on its mutations).
#![no_main]

#[path = "../../engine/tests/gguf_robust/exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::exercise("fuzz.gguf", data.to_vec());
});
