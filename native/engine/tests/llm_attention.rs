//! The LLM runtime's causal attention over the KV cache (llm_attention_split.glsl) against a plain
//! float64 reference, per cache type and head shape: GQA (1, 2, 3, 4, 8 and 16 query heads per kv
//! head, the most `AttnShape` allows), head dims that take the 16-byte loads (64, 128) and that do
//! not (36), one past lavapipe's whole-chunk staging (256: staged in parts), a cache whose length
//! is not a multiple of the 64-key chunk, rows of several slots at positions on and around chunk
//! boundaries (0, 63, 64, the last; 1,023, 1,024 and beyond in a long cache: up to 19 chunks to
//! combine), a prompt-like run of consecutive rows in one slot, and scores large enough that the
//! softmax must subtract its max. Both ways of running the chunks (blocked, for prompts, with 1, 3
//! or 8 rows per workgroup; wide, for decode steps, its combine a dispatch of its own or done by
//! each row's last chunk's workgroup) must give the same bits.
//!
//! Bound (as the encoder's attention test): per row, with δs = (HD + 2)·2^-24·scale·max_j Σ_d
//! |q_d k_jd| (the score's f32 chain), the softmax weights move by at most 2·δs relatively, so
//! |got − ref| ≤ (2·δs + 1e-5)·max_j |v_j| (exp about an ulp; the f32 sums over ≤ 1,200 keys,
//! 64 per chunk, and the chunks' rescaling, with rounding errors of random sign: √n growth).

mod common;

use common::{on_engine, on_engine_alone};
use half::f16;
use nx_vulkan_engine::llm::kernels::{AttnShape, AttnWay, ATTN_BLOCKED_FROM};
use nx_vulkan_engine::llm::sample::Rng;
use nx_vulkan_engine::{Context, DType, Tensor};

const U: f64 = 1.0 / 16_777_216.0;

/// Uniform in [-a, a) from the engine's own generator (as the other LLM tests use it).
fn uniform(rng: &mut Rng, a: f32) -> f32 {
    ((rng.next_f64() * 2.0 - 1.0) * a as f64) as f32
}

fn upload_f32(ctx: &Context, shape: &[usize], v: &[f32]) -> Tensor {
    ctx.upload(DType::F32, shape, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap()
}

fn download_f32(ctx: &Context, t: &Tensor) -> Vec<f32> {
    ctx.download(t).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

struct Case {
    shape: AttnShape,
    q: Vec<f32>,
    /// The caches as the device holds them (f16 values already rounded), [slots, ctx, NKV·HD].
    k: Vec<f32>,
    v: Vec<f32>,
    rows: Vec<(u32, u32)>,
    scale: f32,
}

impl Case {
    fn new(n_head: usize, n_head_kv: usize, head_dim: usize, kv_f16: bool, q_amp: f32, seed: u64) -> Case {
        Case::with_context(n_head, n_head_kv, head_dim, kv_f16, q_amp, seed, 150)
    }

    #[allow(clippy::too_many_arguments)]
    fn with_context(n_head: usize, n_head_kv: usize, head_dim: usize, kv_f16: bool, q_amp: f32, seed: u64, ctx: usize) -> Case {
        let slots = 3;
        let shape = AttnShape { n_head, n_head_kv, head_dim, rope_dims: 0, rope_neox: false, ctx, slots, kv_f16 };
        let mut rng = Rng::new(seed);
        let cache_len = slots * ctx * n_head_kv * head_dim;
        let round = |x: f32| if kv_f16 { f16::from_f32(x).to_f32() } else { x };
        let k = (0..cache_len).map(|_| round(uniform(&mut rng, 1.0))).collect();
        let v = (0..cache_len).map(|_| round(uniform(&mut rng, 1.0))).collect();
        // Decode-like rows of several slots at chunk edges, then a prompt of 40 consecutive
        // positions in slot 1 crossing the chunk boundary at 128.
        let last = ctx as u32 - 1;
        let mut rows = vec![(0, 0), (2, last), (0, 63), (0, 64), (2, 128), (1, 5)];
        if ctx > 1100 {
            // many chunks to combine
            rows.extend([(0, 1023), (0, 1024), (2, 1088)]);
        }
        rows.extend((100..140).map(|p| (1, p)));
        let q = (0..rows.len() * n_head * head_dim).map(|_| uniform(&mut rng, q_amp)).collect();
        Case { shape, q, k, v, rows, scale: 1.0 / (head_dim as f32).sqrt() }
    }

    /// (value, tolerance) per output element, [T, NH·HD].
    fn reference(&self) -> Vec<(f64, f64)> {
        let s = &self.shape;
        let (hd, kvd) = (s.head_dim, s.n_head_kv * s.head_dim);
        let mut out = Vec::new();
        for (t, &(slot, pos)) in self.rows.iter().enumerate() {
            for h in 0..s.n_head {
                let kvh = h / (s.n_head / s.n_head_kv);
                let q = &self.q[(t * s.n_head + h) * hd..][..hd];
                let at = |j: usize| (slot as usize * s.ctx + j) * kvd + kvh * hd;
                let keys = 0..=pos as usize;
                let mut ds = 0.0f64;
                let scores: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        let k = &self.k[at(j)..][..hd];
                        let abs: f64 = q.iter().zip(k).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                        ds = ds.max((hd + 2) as f64 * U * self.scale as f64 * abs);
                        q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * self.scale as f64
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let l: f64 = p.iter().sum();
                let vmax = keys.clone().flat_map(|j| self.v[at(j)..][..hd].iter().map(|x| x.abs() as f64)).fold(0.0, f64::max);
                for d in 0..hd {
                    let o: f64 = keys.clone().map(|j| p[j] / l * self.v[at(j) + d] as f64).sum();
                    out.push((o, (2.0 * ds + 1e-5) * vmax));
                }
            }
        }
        out
    }

    /// The device's output run `way` (None: what record_llm_attention picks), and the
    /// dispatches it recorded. The scratch's chunk counters must be zero after it (the fused
    /// combine resets them for the next layer).
    fn run(&self, ctx: &Context, way: Option<AttnWay>) -> (Vec<f32>, u64) {
        let s = &self.shape;
        let t = self.rows.len();
        let cache = |vals: &[f32]| {
            if s.kv_f16 {
                let bytes: Vec<u8> = vals.iter().flat_map(|&x| f16::from_f32(x).to_le_bytes()).collect();
                ctx.upload(DType::F16, &s.cache_shape(), &bytes).unwrap()
            } else {
                upload_f32(ctx, &s.cache_shape(), vals)
            }
        };
        let (ck, cv) = (cache(&self.k), cache(&self.v));
        let q = upload_f32(ctx, &[t, s.n_head * s.head_dim], &self.q);
        let rows_bytes: Vec<u8> = self.rows.iter().flat_map(|&(a, b)| [a.to_le_bytes(), b.to_le_bytes()]).flatten().collect();
        let rows = ctx.upload(DType::U32, &[t, 2], &rows_bytes).unwrap();
        let max_pos = self.rows.iter().map(|r| r.1 as usize).max().unwrap();
        let scratch = ctx.llm_attention_scratch(s, t, max_pos).unwrap();
        let out = ctx.empty(DType::F32, &[t, s.n_head * s.head_dim]).unwrap();
        let before = ctx.stats().dispatches;
        let mut batch = ctx.batch().unwrap();
        match way {
            Some(w) => ctx.record_llm_attention_as(&mut batch, s, &q, &rows, &ck, &cv, self.scale, &scratch, &out, w).unwrap(),
            None => ctx.record_llm_attention(&mut batch, s, &q, &rows, &ck, &cv, self.scale, &scratch, &out).unwrap(),
        }
        batch.finish().unwrap();
        let counters = ctx.download(&scratch.counters).unwrap();
        assert!(counters.iter().all(|&b| b == 0), "{way:?} left chunk counters non-zero");
        (download_f32(ctx, &out), ctx.stats().dispatches - before)
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn attention_matches_the_float64_reference_every_way() {
    // alone: the dispatch count is the engine's global counter
    on_engine_alone(|ctx| {
        for (nh, nkv, hd, f16_cache, q_amp) in [
            (4, 2, 64, true, 1.0),
            (4, 1, 128, true, 1.0),
            (9, 3, 64, true, 1.0),
            (8, 1, 64, true, 1.0),
            (16, 1, 64, true, 1.0),
            (2, 2, 36, true, 1.0),
            (2, 2, 36, false, 1.0),
            (2, 1, 128, false, 1.0),
            (2, 1, 256, false, 1.0),
            // scores near ±100: e^s overflows f32 unless the max is subtracted
            (4, 2, 64, true, 12.0),
        ] {
            let case = Case::new(nh, nkv, hd, f16_cache, q_amp, (nh * 1000 + hd) as u64);
            let want = case.reference();
            let (picked, dispatches) = case.run(ctx, None);
            assert_eq!(dispatches, 2, "split + combine, NH {nh} HD {hd}");
            for (i, (&g, &(w, tol))) in picked.iter().zip(&want).enumerate() {
                assert!(g.is_finite() && (g as f64 - w).abs() <= tol, "NH {nh} NKV {nkv} HD {hd} f16 {f16_cache} at {i} (row {}): {g} vs {w} (tol {tol:e})", i / (nh * hd));
            }
            // The case's 46 rows take the blocked way; the wide one (decode steps) and other
            // rows per workgroup must give the same bits.
            assert!(case.rows.len() >= ATTN_BLOCKED_FROM);
            for way in [AttnWay::Wide { fused_combine: true }, AttnWay::Wide { fused_combine: false }, AttnWay::Blocked { rows_per_group: 3 }, AttnWay::Blocked { rows_per_group: 8 }] {
                let (got, dispatches) = case.run(ctx, Some(way));
                assert_eq!(bits(&got), bits(&picked), "NH {nh} HD {hd} f16 {f16_cache}: {way:?} changed bits");
                let fused = matches!(way, AttnWay::Wide { fused_combine: true });
                assert_eq!(dispatches, if fused { 1 } else { 2 }, "{way:?}: the combine is {}a dispatch", if fused { "not " } else { "" });
            }
        }
    });
}

/// A decode-sized step (fewer rows than ATTN_BLOCKED_FROM: the first 6 rows, of three slots,
/// up to 3 chunks each, and the long case's up to 18) takes the wide way with its combine done
/// by each row's last chunk's workgroup: one dispatch, the blocked way's bits, the reference's
/// values.
#[test]
fn decode_steps_fuse_the_combine() {
    // alone: the dispatch count is the engine's global counter
    on_engine_alone(|ctx| {
        for mut case in [Case::new(8, 2, 64, true, 1.0, 5), Case::with_context(4, 1, 128, false, 1.0, 6, 1200)] {
            let n = 6 + 3 * (case.shape.ctx > 1100) as usize;
            case.rows.truncate(n);
            case.q.truncate(n * case.shape.n_head * case.shape.head_dim);
            let want = case.reference();
            let (got, dispatches) = case.run(ctx, None);
            assert_eq!(dispatches, 1, "the split alone");
            for (i, (&g, &(w, tol))) in got.iter().zip(&want).enumerate() {
                assert!(g.is_finite() && (g as f64 - w).abs() <= tol, "at {i}: {g} vs {w} (tol {tol:e})");
            }
            let (blocked, _) = case.run(ctx, Some(AttnWay::Blocked { rows_per_group: 1 }));
            assert_eq!(bits(&got), bits(&blocked));
        }
    });
}

/// Long rows: 19 chunks to combine (positions past 1,024).
#[test]
fn long_rows_match_too() {
    on_engine(|ctx| {
        let case = Case::with_context(4, 2, 64, true, 1.0, 11, 1200);
        let want = case.reference();
        let (got, _) = case.run(ctx, None);
        for (i, (&g, &(w, tol))) in got.iter().zip(&want).enumerate() {
            assert!(g.is_finite() && (g as f64 - w).abs() <= tol, "at {i} (row {}): {g} vs {w} (tol {tol:e})", i / (4 * 64));
        }
        for fused_combine in [true, false] {
            let (wide, _) = case.run(ctx, Some(AttnWay::Wide { fused_combine }));
            assert_eq!(bits(&wide), bits(&got), "wide, fused combine {fused_combine}");
        }
    });
}

/// A wrong answer must be visible: one cache value changed in slot 1 moves the prompt rows'
/// outputs past the bound (the test above would see a kernel that read the wrong slot or key).
#[test]
fn a_changed_cache_value_is_seen() {
    on_engine(|ctx| {
        let mut case = Case::new(4, 2, 64, true, 1.0, 7);
        let want = case.reference();
        let kvd = 2 * 64;
        let (slot, pos, ctx_len) = (1, 100, 150);
        case.v[(slot * ctx_len + pos) * kvd + 3] += 0.5; // kv head 0, dim 3
        let (got, _) = case.run(ctx, None);
        let worst = got.iter().zip(&want).map(|(&g, &(w, tol))| (g as f64 - w).abs() / tol).fold(0.0, f64::max);
        assert!(worst > 10.0, "a changed value of V went unseen: worst error {worst} of the bound");
    });
}

#[test]
fn zero_rows_per_workgroup_and_too_many_heads_are_errors() {
    on_engine(|ctx| {
        let case = Case::new(2, 1, 64, true, 1.0, 3);
        let s = &case.shape;
        let q = ctx.empty(DType::F32, &[1, 128]).unwrap();
        let rows = ctx.upload(DType::U32, &[1, 2], &[0u8; 8]).unwrap();
        let ck = ctx.empty(DType::F16, &s.cache_shape()).unwrap();
        let scratch = ctx.llm_attention_scratch(s, 1, 0).unwrap();
        let out = ctx.empty(DType::F32, &[1, 128]).unwrap();
        let mut batch = ctx.batch().unwrap();
        let err = ctx.record_llm_attention_as(&mut batch, s, &q, &rows, &ck, &ck, 0.1, &scratch, &out, AttnWay::Blocked { rows_per_group: 0 }).unwrap_err();
        assert!(err.to_string().contains("rows_per_group"), "{err}");
        // 17 query heads per kv head: more chains than the blocked way keeps
        let wide = AttnShape { n_head: 17, n_head_kv: 1, ..*s };
        let err = ctx.record_llm_attention(&mut batch, &wide, &q, &rows, &ck, &ck, 0.1, &scratch, &out).unwrap_err();
        assert!(err.to_string().contains("unsupported attention shape"), "{err}");
    });
}
