//! Tensors: a device buffer seen through a dtype, a shape and element strides.
//!
//! Reshape of a contiguous tensor, transpose, broadcast, slice and reverse are views (no copy);
//! kernels read views through their strides, and `Context::contiguous` materialises one.

use crate::dtype::DType;
use crate::error::{invalid, Result};
use crate::memory::DeviceBuffer;
use std::sync::Arc;

/// The most elements one tensor may hold: kernels index with 32-bit arithmetic.
pub const MAX_ELEMENTS: usize = i32::MAX as usize;

#[derive(Clone, Debug)]
pub struct Tensor {
    pub(crate) buffer: Arc<DeviceBuffer>,
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<usize>,
    /// Element strides; 0 for broadcast axes, negative for reversed ones.
    pub(crate) strides: Vec<isize>,
    /// Element offset of index (0, 0, ...) in the buffer.
    pub(crate) offset: usize,
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The most axes a tensor may have. Kernels are generated per rank, and their source grows
/// with it (a rank-100,000 iota took minutes to build); Nx programs stay far below this.
pub const MAX_RANK: usize = 64;

/// The element count of `shape`, or an error when it overflows or exceeds `MAX_ELEMENTS`
/// (a plain product wraps: [2^32, 2^32] would count as 0 elements), or the rank exceeds
/// `MAX_RANK`.
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_RANK {
        return Err(invalid!("rank {} exceeds the most supported ({MAX_RANK})", shape.len()));
    }
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    match n {
        Some(n) if n <= MAX_ELEMENTS => Ok(n),
        _ => Err(invalid!("shape {shape:?} has more than {MAX_ELEMENTS} elements, the most a tensor may hold")),
    }
}

pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = s;
        s *= shape[d].max(1) as isize;
    }
    strides
}

impl Tensor {
    pub(crate) fn new(buffer: Arc<DeviceBuffer>, dtype: DType, shape: Vec<usize>) -> Tensor {
        let strides = contiguous_strides(&shape);
        Tensor { buffer, dtype, shape, strides, offset: 0 }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    pub fn byte_size(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    pub fn buffer(&self) -> &Arc<DeviceBuffer> {
        &self.buffer
    }

    /// True when elements lie in row-major order from `offset` with no gaps.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() <= 1 {
            return true;
        }
        let expected = contiguous_strides(&self.shape);
        self.shape
            .iter()
            .zip(self.strides.iter().zip(expected.iter()))
            .all(|(&n, (s, e))| n == 1 || s == e)
    }

    /// Reinterprets the element type of a contiguous tensor with the same element width.
    pub fn bitcast(&self, dtype: DType) -> Result<Tensor> {
        if dtype.size() != self.dtype.size() {
            return Err(invalid!("bitcast from {} to {}: element sizes differ", self.dtype, dtype));
        }
        Ok(Tensor { dtype, ..self.clone() })
    }

    /// A view with a new shape; the tensor must be contiguous (call `Context::contiguous` first).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if checked_numel(shape)? != self.numel() {
            return Err(invalid!(
                "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                self.shape,
                self.numel(),
                shape,
                numel(shape)
            ));
        }
        if !self.is_contiguous() {
            return Err(invalid!("reshape of a non-contiguous view: materialise it first"));
        }
        Ok(Tensor { shape: shape.to_vec(), strides: contiguous_strides(shape), ..self.clone() })
    }

    /// Permutes axes: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn transpose(&self, perm: &[usize]) -> Result<Tensor> {
        let rank = self.shape.len();
        let mut seen = vec![false; rank];
        if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
            return Err(invalid!("transpose axes {perm:?} are not a permutation of 0..{rank}"));
        }
        Ok(Tensor {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            ..self.clone()
        })
    }

    /// Broadcasts to `shape`: `axes[i]` is the result axis that axis `i` of `self` maps to
    /// (Nx's broadcast/3); each mapped axis must equal the target or be 1.
    pub fn broadcast(&self, shape: &[usize], axes: &[usize]) -> Result<Tensor> {
        checked_numel(shape)?;
        if axes.len() != self.shape.len() || axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= shape.len()) {
            return Err(invalid!("broadcast axes {axes:?} do not fit shape {:?} into {shape:?}", self.shape));
        }
        let mut strides = vec![0isize; shape.len()];
        for (i, &a) in axes.iter().enumerate() {
            if self.shape[i] == shape[a] {
                strides[a] = self.strides[i];
            } else if self.shape[i] != 1 {
                return Err(invalid!("cannot broadcast {:?} to {shape:?} along axes {axes:?}", self.shape));
            }
        }
        Ok(Tensor { shape: shape.to_vec(), strides, ..self.clone() })
    }

    /// Broadcasts with numpy/Nx rules (trailing axes aligned).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if shape.len() < self.shape.len() {
            return Err(invalid!("cannot broadcast {:?} to lower rank {shape:?}", self.shape));
        }
        let lead = shape.len() - self.shape.len();
        let axes: Vec<usize> = (lead..shape.len()).collect();
        self.broadcast(shape, &axes)
    }

    /// A strided window: `start[i] + k*step[i]` for `k < lengths[i]`.
    pub fn slice(&self, start: &[usize], lengths: &[usize], steps: &[usize]) -> Result<Tensor> {
        let rank = self.shape.len();
        if start.len() != rank || lengths.len() != rank || steps.len() != rank {
            return Err(invalid!("slice needs {rank} starts, lengths and steps"));
        }
        let mut offset = self.offset as isize;
        let mut strides = self.strides.clone();
        for d in 0..rank {
            if steps[d] == 0 {
                return Err(invalid!("slice step must be positive, got {:?}", steps));
            }
            // Checked: lengths and steps come from callers and may be huge.
            let last = if lengths[d] == 0 {
                Some(start[d])
            } else {
                (lengths[d] - 1).checked_mul(steps[d]).and_then(|x| x.checked_add(start[d]))
            };
            if last.is_none_or(|last| lengths[d] > 0 && last >= self.shape[d]) || start[d] > self.shape[d] {
                return Err(invalid!(
                    "slice start {start:?} lengths {lengths:?} steps {steps:?} out of bounds for shape {:?}",
                    self.shape
                ));
            }
            if lengths[d] > 0 {
                offset += start[d] as isize * self.strides[d];
            }
            // (wraps only for a length-1 axis with a huge step, whose stride is never used)
            strides[d] = strides[d].wrapping_mul(steps[d] as isize);
        }
        checked_numel(lengths)?;
        Ok(Tensor { shape: lengths.to_vec(), strides, offset: offset as usize, ..self.clone() })
    }

    /// Reverses the given axes.
    pub fn reverse(&self, axes: &[usize]) -> Result<Tensor> {
        let mut t = self.clone();
        for &a in axes {
            if a >= t.shape.len() {
                return Err(invalid!("reverse axis {a} out of range for rank {}", t.shape.len()));
            }
            if t.shape[a] > 1 {
                t.offset = (t.offset as isize + (t.shape[a] as isize - 1) * t.strides[a]) as usize;
                t.strides[a] = -t.strides[a];
            }
        }
        Ok(t)
    }
}
