//! The parameter block every kernel reads through `pc.params` (see `submit::PushConstants`):
//! one builder for every family.
//!
//! A block is little-endian fields laid out back to back, in the order the kernel reads them:
//! by convention the buffer addresses first (8 bytes each, `ParamsU64(pc.params).v[i]`), then
//! 32-bit integers (`ParamsI32(pc.params + 8 * addresses)`) — shapes, strides, offsets — and,
//! where a family needs them, 64-bit fields. Kernels index with 32-bit arithmetic, so a value
//! that does not fit an `i32` field is an error naming the family, never a silent wrap.
//!
//! ```
//! use nx_vulkan_engine::params::ParamBlock;
//! let (input, output) = (0x1000u64, 0x2000u64); // `t.buffer().address()` in a kernel family
//! let mut p = ParamBlock::new("window");
//! p.addr(input).addr(output);
//! p.i32(7usize)?.i32s([4isize, -1])?; // offset, then strides
//! assert_eq!(p.bytes().len(), 16 + 12);
//! assert!(p.i32(1usize << 40).is_err()); // "window parameter 1099511627776 exceeds 32 bits"
//! // batch.dispatch(&kernel, p.bytes(), count)?;
//! # Ok::<(), nx_vulkan_engine::EngineError>(())
//! ```

use crate::error::{invalid, Result};
use std::fmt::Display;

/// A kernel's parameter block under construction.
#[derive(Clone, Debug)]
pub struct ParamBlock {
    bytes: Vec<u8>,
    /// Names the kernel family in overflow errors ("sort parameter 4294967296 exceeds 32 bits").
    family: &'static str,
}

impl ParamBlock {
    pub fn new(family: &'static str) -> ParamBlock {
        ParamBlock { bytes: Vec::with_capacity(128), family }
    }

    /// A buffer's device address (8 bytes).
    pub fn addr(&mut self, address: u64) -> &mut Self {
        self.bytes.extend_from_slice(&address.to_le_bytes());
        self
    }

    /// Several addresses, in order.
    pub fn addrs<I: IntoIterator<Item = u64>>(&mut self, addresses: I) -> &mut Self {
        for a in addresses {
            self.addr(a);
        }
        self
    }

    /// A 64-bit field: a signed value, or any 8 bytes (`f64::to_bits` as `i64`).
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A 32-bit signed field; a value outside `i32` is an error.
    pub fn i32<T: TryInto<i32> + Copy + Display>(&mut self, v: T) -> Result<&mut Self> {
        let x: i32 = v.try_into().map_err(|_| invalid!("{} parameter {v} exceeds 32 bits", self.family))?;
        self.bytes.extend_from_slice(&x.to_le_bytes());
        Ok(self)
    }

    /// Several 32-bit fields, in order.
    pub fn i32s<T: TryInto<i32> + Copy + Display, I: IntoIterator<Item = T>>(&mut self, vs: I) -> Result<&mut Self> {
        for v in vs {
            self.i32(v)?;
        }
        Ok(self)
    }

    /// The byte offset the next field will take (for `set_i32`).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Overwrites the 32-bit field at byte offset `at` (a multi-pass kernel changing its pass
    /// number between dispatches of one block).
    pub fn set_i32<T: TryInto<i32> + Copy + Display>(&mut self, at: usize, v: T) -> Result<()> {
        let x: i32 = v.try_into().map_err(|_| invalid!("{} parameter {v} exceeds 32 bits", self.family))?;
        let field = self.bytes.get_mut(at..at + 4).ok_or_else(|| invalid!("{} parameter block has no field at byte {at}", self.family))?;
        field.copy_from_slice(&x.to_le_bytes());
        Ok(())
    }

    /// The block as the kernel reads it.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_little_endian_and_in_order() {
        let mut p = ParamBlock::new("test");
        p.addr(0x0102_0304_0506_0708).i32(-2i64).unwrap().i32(3usize).unwrap();
        p.i64(-1);
        assert_eq!(
            p.bytes(),
            [8, 7, 6, 5, 4, 3, 2, 1, 0xfe, 0xff, 0xff, 0xff, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        p.set_i32(8, 7isize).unwrap();
        assert_eq!(&p.bytes()[8..12], &[7, 0, 0, 0]);
    }

    #[test]
    fn overflow_is_an_error_naming_the_family() {
        let mut p = ParamBlock::new("sort");
        let e = p.i32(1usize << 31).unwrap_err().to_string();
        assert!(e.contains("sort parameter 2147483648 exceeds 32 bits"), "{e}");
        assert!(p.i32(-(1i64 << 31)).is_ok());
        assert!(p.set_i32(100, 1).is_err());
        assert!(p.set_i32(0, i64::MAX).is_err());
    }
}
