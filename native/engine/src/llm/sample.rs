//! Choosing the next token from a row of logits: greedy, or temperature sampling narrowed by
//! top-k, top-p and min-p, after a repetition penalty — llama.cpp's samplers in llama.cpp's
//! order (penalties, top-k, top-p, min-p, temperature, draw). A session's draws come from its
//! own seeded generator, so its tokens do not depend on what else shares a decode step.

use crate::error::{invalid, Result};

/// How a session picks tokens. `temperature <= 0` is greedy (the lowest id among equal
/// maxima, as the device argmax picks).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    pub temperature: f32,
    /// 0: no limit.
    pub top_k: usize,
    /// 1.0: no limit.
    pub top_p: f32,
    /// 0.0: no limit. Keeps tokens whose probability is at least `min_p` × the best one's.
    pub min_p: f32,
    /// 1.0: none. A logit of a token among the last `repeat_last_n` is divided by it when
    /// positive, multiplied when negative (llama.cpp's rule).
    pub repeat_penalty: f32,
    pub repeat_last_n: usize,
    pub seed: u64,
    /// Log-probabilities of this many best alternatives per token (0: none). The chosen
    /// token's log-probability is always reported.
    pub logprobs: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, repeat_last_n: 64, seed: 0, logprobs: 0 }
    }
}

impl SamplingParams {
    pub fn check(&self) -> Result<()> {
        let finite = |v: f32| v.is_finite();
        if !finite(self.temperature) || self.temperature < 0.0 || self.temperature > 100.0 {
            return Err(invalid!("temperature {} must be in [0, 100]", self.temperature));
        }
        if !finite(self.top_p) || !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid!("top_p {} must be in (0, 1]", self.top_p));
        }
        if !finite(self.min_p) || !(0.0..=1.0).contains(&self.min_p) {
            return Err(invalid!("min_p {} must be in [0, 1]", self.min_p));
        }
        if !finite(self.repeat_penalty) || self.repeat_penalty <= 0.0 || self.repeat_penalty > 100.0 {
            return Err(invalid!("repeat_penalty {} must be in (0, 100]", self.repeat_penalty));
        }
        if self.logprobs > 20 {
            return Err(invalid!("logprobs {} is more than 20 alternatives", self.logprobs));
        }
        Ok(())
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Whether the device argmax alone can choose: greedy, no penalty, no log-probabilities.
    pub fn device_argmax_suffices(&self) -> bool {
        self.is_greedy() && self.repeat_penalty == 1.0 && self.logprobs == 0
    }
}

/// xoshiro256** seeded through splitmix64: small, fast, and fixed here, so a seed gives the
/// same tokens in every release (a library generator promises no such stability).
#[derive(Clone, Debug)]
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The chosen token, its log-probability under the model's distribution (log-softmax of the
/// raw logits), and the best alternatives' (`params.logprobs` of them, best first).
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub id: u32,
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
}

/// The lowest index among the maxima (NaN never wins); `None` when every value is NaN.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<usize> = None;
    for (i, &x) in logits.iter().enumerate() {
        if !x.is_nan() && best.is_none_or(|b| x > logits[b]) {
            best = Some(i);
        }
    }
    best.map(|b| b as u32)
}

/// log-softmax denominators: (max, ln Σ e^(x − max)) over the finite part of `logits`.
fn log_normaliser(logits: &[f32]) -> (f64, f64) {
    let m = logits.iter().filter(|x| !x.is_nan()).fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let s: f64 = logits.iter().filter(|x| !x.is_nan()).map(|&x| (x as f64 - m).exp()).sum();
    (m, s.ln())
}

/// Picks the next token from `logits` (one row, the vocabulary) given the session's recent
/// tokens (`history`, for the repetition penalty) and its generator.
pub fn sample(logits: &[f32], params: &SamplingParams, history: &[u32], rng: &mut Rng) -> Result<Pick> {
    if logits.is_empty() {
        return Err(invalid!("no logits to sample from"));
    }
    let mut adjusted: Vec<f32> = logits.to_vec();
    if params.repeat_penalty != 1.0 {
        let from = history.len().saturating_sub(params.repeat_last_n);
        let mut seen = vec![false; adjusted.len()];
        for &t in &history[from..] {
            if let Some(s) = seen.get_mut(t as usize) {
                if !*s {
                    *s = true;
                    let l = &mut adjusted[t as usize];
                    *l = if *l > 0.0 { *l / params.repeat_penalty } else { *l * params.repeat_penalty };
                }
            }
        }
    }
    let id = if params.is_greedy() {
        argmax(&adjusted).ok_or_else(|| invalid!("every logit is NaN"))?
    } else {
        draw(&adjusted, params, rng)?
    };
    let (m, ln_s) = log_normaliser(logits);
    let lp = |i: u32| (logits[i as usize] as f64 - m - ln_s) as f32;
    let top = if params.logprobs > 0 {
        let mut order: Vec<u32> = (0..logits.len() as u32).filter(|&i| !logits[i as usize].is_nan()).collect();
        let k = params.logprobs.min(order.len());
        if k > 0 && k < order.len() {
            order.select_nth_unstable_by(k - 1, |&a, &b| by_logit_desc(logits, a, b));
        }
        order.truncate(k);
        order.sort_by(|&a, &b| by_logit_desc(logits, a, b));
        order.into_iter().map(|i| (i, lp(i))).collect()
    } else {
        vec![]
    };
    Ok(Pick { id, logprob: lp(id), top })
}

/// Higher logit first, then lower id.
fn by_logit_desc(logits: &[f32], a: u32, b: u32) -> std::cmp::Ordering {
    logits[b as usize].partial_cmp(&logits[a as usize]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
}

/// Temperature sampling over the candidates top-k, top-p and min-p leave.
fn draw(logits: &[f32], params: &SamplingParams, rng: &mut Rng) -> Result<u32> {
    let mut cand: Vec<u32> = (0..logits.len() as u32).filter(|&i| logits[i as usize].is_finite() || logits[i as usize] == f32::INFINITY).collect();
    if cand.is_empty() {
        return Err(invalid!("no finite logit to sample from"));
    }
    if params.top_k > 0 && params.top_k < cand.len() {
        cand.select_nth_unstable_by(params.top_k - 1, |&a, &b| by_logit_desc(logits, a, b));
        cand.truncate(params.top_k);
    }
    cand.sort_by(|&a, &b| by_logit_desc(logits, a, b));
    // Probabilities at temperature 1 for top-p / min-p (llama.cpp applies them before the
    // temperature), in f64.
    let m = logits[cand[0] as usize] as f64;
    let p1: Vec<f64> = cand.iter().map(|&i| (logits[i as usize] as f64 - m).exp()).collect();
    let total: f64 = p1.iter().sum();
    let mut keep = cand.len();
    if params.top_p < 1.0 {
        let mut acc = 0.0;
        for (j, p) in p1.iter().enumerate() {
            acc += p / total;
            if acc >= params.top_p as f64 {
                keep = j + 1;
                break;
            }
        }
    }
    if params.min_p > 0.0 {
        // p1[0] is the best one's (= 1 before normalising).
        let floor = params.min_p as f64 * p1[0];
        keep = keep.min(p1.iter().take_while(|&&p| p >= floor).count().max(1));
    }
    cand.truncate(keep);
    let t = params.temperature as f64;
    let w: Vec<f64> = cand.iter().map(|&i| ((logits[i as usize] as f64 - m) / t).exp()).collect();
    let sum: f64 = w.iter().sum();
    let mut r = rng.next_f64() * sum;
    for (j, wj) in w.iter().enumerate() {
        if r < *wj {
            return Ok(cand[j]);
        }
        r -= wj;
    }
    Ok(*cand.last().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32) -> SamplingParams {
        SamplingParams { temperature, ..Default::default() }
    }

    #[test]
    fn greedy_takes_the_lowest_id_among_maxima_and_skips_nan() {
        let mut rng = Rng::new(1);
        let l = [1.0, f32::NAN, 3.0, 3.0, -1.0];
        assert_eq!(sample(&l, &params(0.0), &[], &mut rng).unwrap().id, 2);
        assert_eq!(argmax(&[f32::NAN, f32::NAN]), None);
        assert!(sample(&[f32::NAN], &params(0.0), &[], &mut rng).is_err());
    }

    #[test]
    fn logprobs_are_the_log_softmax_of_the_raw_logits() {
        let l = [0.0f32, 1.0, 2.0, 3.0];
        let p = SamplingParams { logprobs: 2, ..params(0.0) };
        let pick = sample(&l, &p, &[], &mut Rng::new(0)).unwrap();
        let z: f64 = l.iter().map(|&x| (x as f64).exp()).sum();
        assert_eq!(pick.id, 3);
        assert!((pick.logprob as f64 - (3.0 - z.ln())).abs() < 1e-6);
        assert_eq!(pick.top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![3, 2]);
        assert!((pick.top[1].1 as f64 - (2.0 - z.ln())).abs() < 1e-6);
    }

    #[test]
    fn the_repetition_penalty_follows_llama_cpp() {
        // Token 0 (logit 2.0) was seen: 2.0 / 4 = 0.5 < 1.0, so greedy moves to token 1.
        let l = [2.0f32, 1.0, -1.0];
        let p = SamplingParams { repeat_penalty: 4.0, ..params(0.0) };
        assert_eq!(sample(&l, &p, &[0], &mut Rng::new(0)).unwrap().id, 1);
        // Negative logits are multiplied: token 2 seen, -4.0; still not chosen.
        assert_eq!(sample(&l, &p, &[0, 2], &mut Rng::new(0)).unwrap().id, 1);
        // Only the last repeat_last_n tokens count.
        let p1 = SamplingParams { repeat_last_n: 1, ..p };
        assert_eq!(sample(&l, &p1, &[0, 2], &mut Rng::new(0)).unwrap().id, 0);
    }

    #[test]
    fn a_seed_reproduces_its_draws_and_frequencies_follow_the_softmax() {
        let l = [0.0f32, 1.0, 2.0];
        let p = params(1.0);
        let draws = |seed| {
            let mut rng = Rng::new(seed);
            (0..20000).map(|_| sample(&l, &p, &[], &mut rng).unwrap().id).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7));
        assert_ne!(a, draws(8));
        let z: f64 = l.iter().map(|&x| (x as f64).exp()).sum();
        for id in 0..3u32 {
            let f = a.iter().filter(|&&x| x == id).count() as f64 / a.len() as f64;
            let want = (l[id as usize] as f64).exp() / z;
            assert!((f - want).abs() < 0.015, "token {id}: {f} vs {want}");
        }
    }

    #[test]
    fn top_k_top_p_and_min_p_narrow_the_candidates() {
        let l = [0.0f32, 1.0, 2.0, 3.0, 4.0];
        let seen = |p: &SamplingParams| {
            let mut rng = Rng::new(3);
            let mut ids: Vec<u32> = (0..4000).map(|_| sample(&l, p, &[], &mut rng).unwrap().id).collect();
            ids.sort();
            ids.dedup();
            ids
        };
        assert_eq!(seen(&SamplingParams { top_k: 2, ..params(1.0) }), vec![3, 4]);
        // Softmax of [0..4]: p(4) ≈ 0.636, p(3) ≈ 0.234: top_p 0.8 keeps {4, 3}.
        assert_eq!(seen(&SamplingParams { top_p: 0.8, ..params(1.0) }), vec![3, 4]);
        // min_p 0.3 keeps tokens with p ≥ 0.3 × p(4): e^-1 ≈ 0.37 ≥ 0.3 (3), e^-2 ≈ 0.14 < 0.3.
        assert_eq!(seen(&SamplingParams { min_p: 0.3, ..params(1.0) }), vec![3, 4]);
        assert_eq!(seen(&params(1.0)), vec![0, 1, 2, 3, 4]);
        // A low temperature concentrates on the best.
        assert_eq!(seen(&params(0.01)), vec![4]);
    }

    #[test]
    fn bad_parameters_are_errors() {
        for p in [
            SamplingParams { temperature: -1.0, ..Default::default() },
            SamplingParams { temperature: f32::NAN, ..Default::default() },
            SamplingParams { top_p: 0.0, ..Default::default() },
            SamplingParams { min_p: 1.5, ..Default::default() },
            SamplingParams { repeat_penalty: 0.0, ..Default::default() },
            SamplingParams { logprobs: 100, ..Default::default() },
        ] {
            assert!(p.check().is_err(), "{p:?}");
        }
        assert!(SamplingParams::default().check().is_ok());
    }
}
