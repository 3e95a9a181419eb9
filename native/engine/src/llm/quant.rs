//! ggml's tensor types: block sizes, byte sizes, and a plain CPU dequantizer for each type the
//! runtime reads — the reference the GPU kernels are tested against, bit for bit, and what
//! builds small host-side tables (norm weights, biases).
//!
//! Every formula follows ggml's `dequantize_row_*` (ggml-quants.c) operation for operation in
//! f32, without fused multiply-adds: `d·q − m` is a product rounded to f32, then a difference —
//! the same roundings gguf-py's NumPy dequantizer makes, so the three agree exactly.

use crate::error::{invalid, Result};
use half::{bf16, f16};

/// The ggml types a GGUF tensor can have that this runtime names. Ids are ggml's.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    BF16,
}

/// Values per K-quant super-block.
pub const QK_K: usize = 256;

impl GgmlType {
    pub const ALL: [GgmlType; 15] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
        GgmlType::BF16,
    ];

    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| t.id() == id)
    }

    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q8_1 => 9,
            GgmlType::Q2_K => 10,
            GgmlType::Q3_K => 11,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::Q8_K => 15,
            GgmlType::BF16 => 30,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q8_1 => "Q8_1",
            GgmlType::Q2_K => "Q2_K",
            GgmlType::Q3_K => "Q3_K",
            GgmlType::Q4_K => "Q4_K",
            GgmlType::Q5_K => "Q5_K",
            GgmlType::Q6_K => "Q6_K",
            GgmlType::Q8_K => "Q8_K",
            GgmlType::BF16 => "BF16",
        }
    }

    /// Values per block.
    pub fn block_size(self) -> u64 {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 | GgmlType::Q8_1 => 32,
            _ => QK_K as u64,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> u64 {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q8_1 => 36,
            GgmlType::Q2_K => 84,
            GgmlType::Q3_K => 110,
            GgmlType::Q4_K => 144,
            GgmlType::Q5_K => 176,
            GgmlType::Q6_K => 210,
            GgmlType::Q8_K => 292,
        }
    }

    /// Whether the runtime reads weights of this type (Q8_1 and Q8_K are ggml's activation
    /// formats and never hold weights in a model file).
    pub fn is_weight_type(self) -> bool {
        !matches!(self, GgmlType::Q8_1 | GgmlType::Q8_K)
    }

    /// Bytes of a row of `n` values (`n` a multiple of the block size).
    pub fn row_bytes(self, n: usize) -> usize {
        n / self.block_size() as usize * self.block_bytes() as usize
    }
}

fn h(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` of a Q4_K/Q5_K block.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Dequantizes `bytes` (whole blocks of `ty`) into `out` (block_size values per block).
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let bs = ty.block_size() as usize;
    let bb = ty.block_bytes() as usize;
    if !ty.is_weight_type() {
        return Err(invalid!("{} is an activation format, not a weight type", ty.name()));
    }
    if bytes.len() % bb != 0 || bytes.len() / bb * bs != out.len() {
        return Err(invalid!("dequantize {}: {} bytes cannot fill {} values", ty.name(), bytes.len(), out.len()));
    }
    for (b, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bs)) {
        dequantize_block(ty, b, y);
    }
    Ok(())
}

/// One block (`b.len() == block_bytes`, `y.len() == block_size`).
fn dequantize_block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    match ty {
        GgmlType::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        GgmlType::F16 => y[0] = h(b, 0),
        GgmlType::BF16 => y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
        GgmlType::Q4_0 => {
            let d = h(b, 0);
            for j in 0..16 {
                y[j] = ((b[2 + j] & 0xF) as i32 - 8) as f32 * d;
                y[j + 16] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
            }
        }
        GgmlType::Q4_1 => {
            let (d, m) = (h(b, 0), h(b, 2));
            for j in 0..16 {
                y[j] = (b[4 + j] & 0xF) as f32 * d + m;
                y[j + 16] = (b[4 + j] >> 4) as f32 * d + m;
            }
        }
        GgmlType::Q5_0 => {
            let d = h(b, 0);
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            for j in 0..16 {
                let h0 = ((qh >> j) << 4) & 0x10;
                let h1 = (qh >> (j + 12)) & 0x10;
                y[j] = (((b[6 + j] & 0xF) as u32 | h0) as i32 - 16) as f32 * d;
                y[j + 16] = (((b[6 + j] >> 4) as u32 | h1) as i32 - 16) as f32 * d;
            }
        }
        GgmlType::Q5_1 => {
            let (d, m) = (h(b, 0), h(b, 2));
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            for j in 0..16 {
                let h0 = ((qh >> j) << 4) & 0x10;
                let h1 = (qh >> (j + 12)) & 0x10;
                y[j] = ((b[8 + j] & 0xF) as u32 | h0) as f32 * d + m;
                y[j + 16] = ((b[8 + j] >> 4) as u32 | h1) as f32 * d + m;
            }
        }
        GgmlType::Q8_0 => {
            let d = h(b, 0);
            for j in 0..32 {
                y[j] = (b[2 + j] as i8) as f32 * d;
            }
        }
        GgmlType::Q2_K => {
            // scales[16] qs[64] d dmin
            let (scales, qs) = (&b[0..16], &b[16..80]);
            let (d, min) = (h(b, 80), h(b, 82));
            let mut is = 0;
            for n in 0..2 {
                let q = &qs[n * 32..n * 32 + 32];
                for j in 0..4 {
                    let shift = 2 * j;
                    for half in 0..2 {
                        let sc = scales[is];
                        is += 1;
                        let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
                        for l in 0..16 {
                            y[n * 128 + j * 32 + half * 16 + l] = dl * ((q[half * 16 + l] >> shift) & 3) as f32 - ml;
                        }
                    }
                }
            }
        }
        GgmlType::Q3_K => {
            // hmask[32] qs[64] scales[12] d
            let (hm, qs, raw) = (&b[0..32], &b[32..96], &b[96..108]);
            let d = h(b, 108);
            let scales = q3k_scales(raw);
            let mut is = 0;
            let mut m = 1u8;
            for n in 0..2 {
                let q = &qs[n * 32..n * 32 + 32];
                for j in 0..4 {
                    let shift = 2 * j;
                    for half in 0..2 {
                        let dl = d * (scales[is] as i32 - 32) as f32;
                        is += 1;
                        for l in 0..16 {
                            let i = half * 16 + l;
                            let v = ((q[i] >> shift) & 3) as i32 - if hm[i] & m != 0 { 0 } else { 4 };
                            y[n * 128 + j * 32 + i] = dl * v as f32;
                        }
                    }
                    m <<= 1;
                }
            }
        }
        GgmlType::Q4_K => {
            // d dmin scales[12] qs[128]
            let (d, min) = (h(b, 0), h(b, 2));
            let (scales, qs) = (&b[4..16], &b[16..144]);
            for j in 0..4 {
                let (sc1, m1) = scale_min_k4(2 * j, scales);
                let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
                let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
                let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
                let q = &qs[j * 32..j * 32 + 32];
                for l in 0..32 {
                    y[j * 64 + l] = d1 * (q[l] & 0xF) as f32 - m1;
                    y[j * 64 + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
                }
            }
        }
        GgmlType::Q5_K => {
            // d dmin scales[12] qh[32] qs[128]
            let (d, min) = (h(b, 0), h(b, 2));
            let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
            for j in 0..4 {
                let (sc1, m1) = scale_min_k4(2 * j, scales);
                let (sc2, m2) = scale_min_k4(2 * j + 1, scales);
                let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
                let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
                let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
                let ql = &qs[j * 32..j * 32 + 32];
                for l in 0..32 {
                    let hi1 = if qh[l] & u1 != 0 { 16 } else { 0 };
                    let hi2 = if qh[l] & u2 != 0 { 16 } else { 0 };
                    y[j * 64 + l] = d1 * ((ql[l] & 0xF) + hi1) as f32 - m1;
                    y[j * 64 + 32 + l] = d2 * ((ql[l] >> 4) + hi2) as f32 - m2;
                }
            }
        }
        GgmlType::Q6_K => {
            // ql[128] qh[64] scales[16] (i8) d
            let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
            let d = h(b, 208);
            for n in 0..2 {
                let (ql, qh, sc) = (&ql[n * 64..], &qh[n * 32..], &sc[n * 8..]);
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    let s = |k: usize| d * (sc[is + k] as i8) as f32;
                    y[n * 128 + l] = s(0) * q1 as f32;
                    y[n * 128 + l + 32] = s(2) * q2 as f32;
                    y[n * 128 + l + 64] = s(4) * q3 as f32;
                    y[n * 128 + l + 96] = s(6) * q4 as f32;
                }
            }
        }
        GgmlType::Q8_1 | GgmlType::Q8_K => unreachable!("refused by dequantize"),
    }
}

/// Q3_K's sixteen 6-bit scales, unpacked from their 12 bytes as ggml does.
fn q3k_scales(raw: &[u8]) -> [u8; 16] {
    let (kmask1, kmask2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
    let w = |i: usize| u32::from_le_bytes([raw[4 * i], raw[4 * i + 1], raw[4 * i + 2], raw[4 * i + 3]]);
    let (a0, a1, tmp) = (w(0), w(1), w(2));
    let aux = [
        (a0 & kmask2) | ((tmp & kmask1) << 4),
        (a1 & kmask2) | (((tmp >> 2) & kmask1) << 4),
        ((a0 >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4),
        ((a1 >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4),
    ];
    let mut out = [0u8; 16];
    for (i, a) in aux.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&a.to_le_bytes());
    }
    out
}

/// `rows` random rows of `cols` values of `ty`, for kernel tests and speed benchmarks (no
/// model file): random quant bytes with the f16 scale fields pinned to small values (random
/// f16 bits would be mostly huge or NaN), as bench/llm/gen_model.py writes them; float types
/// uniform in (-0.5, 0.5) rounded to the type.
pub fn random_rows(ty: GgmlType, rows: usize, cols: usize, rng: &mut super::sample::Rng) -> Vec<u8> {
    let n = rows * cols;
    let mut uniform = || (rng.next_f64() - 0.5) as f32;
    match ty {
        GgmlType::F32 => return (0..n).flat_map(|_| uniform().to_le_bytes()).collect(),
        GgmlType::F16 => return (0..n).flat_map(|_| f16::from_f32(uniform()).to_le_bytes()).collect(),
        GgmlType::BF16 => return (0..n).flat_map(|_| bf16::from_f32(uniform()).to_le_bytes()).collect(),
        _ => {}
    }
    let bb = ty.block_bytes() as usize;
    let nb = n / ty.block_size() as usize;
    let mut out = Vec::with_capacity(nb * bb);
    for _ in 0..nb {
        let mut b: Vec<u8> = (0..bb).map(|_| rng.next_u64() as u8).collect();
        let pin = |b: &mut Vec<u8>, at: usize, v: f32| b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
        match ty {
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => pin(&mut b, 0, 1e-2),
            GgmlType::Q4_1 | GgmlType::Q5_1 => {
                pin(&mut b, 0, 1e-2);
                pin(&mut b, 2, -4e-2);
            }
            GgmlType::Q4_K | GgmlType::Q5_K => {
                pin(&mut b, 0, 2e-3);
                pin(&mut b, 2, 1e-2);
            }
            GgmlType::Q6_K => pin(&mut b, 208, 1e-3),
            GgmlType::Q2_K => {
                pin(&mut b, 80, 2e-3);
                pin(&mut b, 82, 1e-2);
            }
            GgmlType::Q3_K => pin(&mut b, 108, 2e-3),
            _ => {}
        }
        out.extend(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_0_block_by_hand() {
        // d = 0.5, nibbles 0..15 then 15..0 → (q - 8) * 0.5
        let mut b = vec![0u8; 18];
        b[0..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        for j in 0..16 {
            b[2 + j] = (j as u8) | ((15 - j as u8) << 4);
        }
        let mut y = [0f32; 32];
        dequantize(GgmlType::Q4_0, &b, &mut y).unwrap();
        for j in 0..16 {
            assert_eq!(y[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(y[j + 16], (7.0 - j as f32) * 0.5);
        }
    }

    #[test]
    fn type_table_is_consistent() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        assert_eq!(GgmlType::from_id(4), None, "Q4_2 was removed from ggml");
        assert!(dequantize(GgmlType::Q8_0, &[0u8; 33], &mut [0f32; 32]).is_err());
    }
}
