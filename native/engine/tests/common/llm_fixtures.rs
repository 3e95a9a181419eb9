//! The LLM fixtures of test/llm/fixtures (random-weight GGUFs written by
//! test/llm/make_fixtures.py, with their float64 reference outputs), shared by the LLM test
//! binaries.

use std::path::{Path, PathBuf};

/// The SmolLM2 GGUF: `NX_VULKAN_SMOLLM2`, else the cache `scripts/fetch-smollm2.sh` fills.
/// Absent → the test fails saying how to fetch it.
pub fn smollm2_path() -> PathBuf {
    let path = match std::env::var_os("NX_VULKAN_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => super::model_cache().join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    assert!(
        path.is_file(),
        "SmolLM2 GGUF not found at {}: run `bash scripts/fetch-smollm2.sh` (it prints the path; \
         or set NX_VULKAN_SMOLLM2 to the file)",
        path.display()
    );
    path
}

/// test/llm: the SmolLM2 reference (smollm2-reference.json and the files it names).
pub fn test_llm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test/llm")
}

/// A JSON array of token ids.
pub fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// A file of little-endian f32 values (the references' logits).
pub fn read_f32s(path: &Path) -> Vec<f32> {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test/llm/fixtures")
}

pub struct Fixture {
    pub name: String,
    pub prompt: Vec<u32>,
    pub greedy: Vec<u32>,
    /// The reference's top-1 − top-2 logit margin at each greedy step.
    pub margins: Vec<f64>,
    /// `[P + 32][vocab]`: row i = logits after feeding token i of prompt + greedy.
    pub logits: Vec<Vec<f32>>,
}

pub fn fixture(name: &str) -> Fixture {
    let dir = fixtures();
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let shape: Vec<usize> = j["logits_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let vals = read_f32s(&dir.join(j["logits_file"].as_str().unwrap()));
    assert_eq!(vals.len(), shape[0] * shape[1]);
    Fixture {
        name: name.into(),
        prompt: ids_of(&j["prompt_ids"]),
        greedy: ids_of(&j["greedy_ids"]),
        margins: j["margins"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect(),
        logits: vals.chunks_exact(shape[1]).map(|r| r.to_vec()).collect(),
    }
}

pub fn all_fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "gguf").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 14, "fixtures missing: {names:?}");
    names
}

/// The largest absolute difference of two logit rows.
pub fn max_abs(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max)
}
