//! GGUF (v2/v3) files, memory-mapped and checked: header, metadata, tensor infos, alignment.
//!
//! The file is untrusted input. Every count, length, offset and size is checked against the
//! bytes that are actually there before anything is allocated or read, so a damaged or hostile
//! file is an [`EngineError::InvalidArgument`] naming the file and the byte offset — never a
//! panic, an out-of-bounds read or an allocation sized by the file. Tensor data is not touched
//! here: [`Gguf::tensor_bytes`] hands out the mapped bytes of one tensor, whose extent was checked
//! at open (inside the data section, aligned, no two tensors overlapping).

use super::quant::GgmlType;
use crate::error::{invalid, EngineError, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"GGUF";
/// Arrays inside arrays deeper than this are refused (the format allows nesting; nothing we
/// read uses more than one level, and unbounded recursion is a stack overflow).
const MAX_ARRAY_DEPTH: usize = 4;
/// ggml tensors have at most 4 dimensions.
const MAX_DIMS: usize = 4;

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v as i64),
            MetaValue::I16(v) => Some(v as i64),
            MetaValue::I32(v) => Some(v as i64),
            MetaValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, if it is a float or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The GGUF name of the value's type (for messages and `nx-vulkan info`).
    pub fn type_name(&self) -> &'static str {
        match self {
            MetaValue::U8(_) => "u8",
            MetaValue::I8(_) => "i8",
            MetaValue::U16(_) => "u16",
            MetaValue::I16(_) => "i16",
            MetaValue::U32(_) => "u32",
            MetaValue::I32(_) => "i32",
            MetaValue::U64(_) => "u64",
            MetaValue::I64(_) => "i64",
            MetaValue::F32(_) => "f32",
            MetaValue::F64(_) => "f64",
            MetaValue::Bool(_) => "bool",
            MetaValue::String(_) => "string",
            MetaValue::Array(_) => "array",
        }
    }

    /// The value for an error message: its type and value, a string cut at 40 characters, an
    /// array by its length (a message never grows with what the file holds).
    pub fn describe(&self) -> String {
        match self {
            MetaValue::String(s) if s.chars().nth(40).is_some() => format!("string {:?}…", s.chars().take(40).collect::<String>()),
            MetaValue::String(s) => format!("string {s:?}"),
            MetaValue::Array(a) => format!("an array of {} {}", a.len(), a.first().map_or("values", MetaValue::type_name)),
            MetaValue::U8(v) => format!("u8 {v}"),
            MetaValue::I8(v) => format!("i8 {v}"),
            MetaValue::U16(v) => format!("u16 {v}"),
            MetaValue::I16(v) => format!("i16 {v}"),
            MetaValue::U32(v) => format!("u32 {v}"),
            MetaValue::I32(v) => format!("i32 {v}"),
            MetaValue::U64(v) => format!("u64 {v}"),
            MetaValue::I64(v) => format!("i64 {v}"),
            MetaValue::F32(v) => format!("f32 {v}"),
            MetaValue::F64(v) => format!("f64 {v}"),
            MetaValue::Bool(v) => format!("bool {v}"),
        }
    }
}

/// One tensor's header: its name, ggml dimensions (`dims[0]` is the contiguous row length) and
/// type, and where its bytes lie in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    /// `None` for a type id this runtime does not know (reported, refused when used).
    pub ggml_type: Option<GgmlType>,
    pub type_id: u32,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Bytes the tensor occupies (0 when the type is unknown).
    pub size: u64,
}

impl TensorInfo {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// `[rows, row_length]` of a 2-D tensor (a PyTorch `[out, in]` matrix).
    pub fn matrix_shape(&self) -> Option<(usize, usize)> {
        match self.dims[..] {
            [cols, rows] => Some((rows as usize, cols as usize)),
            _ => None,
        }
    }

    pub fn type_name(&self) -> String {
        match self.ggml_type {
            Some(t) => t.name().to_string(),
            None => format!("type {}", self.type_id),
        }
    }
}

/// An opened GGUF file.
pub struct Gguf {
    pub path: PathBuf,
    pub version: u32,
    pub alignment: u64,
    /// Keys in file order are not needed by anything; sorted keys make `info` stable.
    pub metadata: BTreeMap<String, MetaValue>,
    pub tensors: Vec<TensorInfo>,
    by_name: BTreeMap<String, usize>,
    /// Absolute offset of the tensor data section.
    pub data_offset: u64,
    bytes: Bytes,
}

enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gguf({}, v{}, {} keys, {} tensors)", self.path.display(), self.version, self.metadata.len(), self.tensors.len())
    }
}

/// A bounds-checked little-endian reader over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: impl std::fmt::Display) -> EngineError {
        invalid!("{}: not a valid GGUF file: {what} (at byte {})", self.file.display(), self.pos)
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let left = (self.bytes.len() - self.pos) as u64;
        if n > left {
            return Err(self.err(format_args!("{what} needs {n} bytes, {left} left (truncated?)")));
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N as u64, what)?.try_into().expect("take returned N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let len = self.u64(what)?;
        let start = self.pos;
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| {
            invalid!("{}: not a valid GGUF file: {what} is not UTF-8 (at byte {start})", self.file.display())
        })
    }

    fn value(&mut self, type_id: u32, depth: usize, what: &str) -> Result<MetaValue> {
        Ok(match type_id {
            0 => MetaValue::U8(self.array::<1>(what)?[0]),
            1 => MetaValue::I8(self.array::<1>(what)?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array(what)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array(what)?)),
            4 => MetaValue::U32(self.u32(what)?),
            5 => MetaValue::I32(i32::from_le_bytes(self.array(what)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(self.err(format_args!("{what}: bool byte {b}"))),
            },
            8 => MetaValue::String(self.string(what)?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.err(format_args!("{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let elem = self.u32(what)?;
                let count = self.u64(what)?;
                // Every element takes at least one byte (strings and arrays at least 8): a count
                // the remaining bytes cannot hold is refused before anything is allocated.
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4 | 5 | 6 => 4,
                    8 | 10 | 11 | 12 => 8,
                    9 => 12,
                    t => return Err(self.err(format_args!("{what}: unknown array element type {t}"))),
                };
                let left = (self.bytes.len() - self.pos) as u64;
                if count.checked_mul(min).is_none_or(|need| need > left) {
                    return Err(self.err(format_args!("{what}: array of {count} elements does not fit in the {left} bytes left")));
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(elem, depth + 1, what)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(self.u64(what)?),
            11 => MetaValue::I64(i64::from_le_bytes(self.array(what)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array(what)?)),
            t => return Err(self.err(format_args!("{what}: unknown value type {t}"))),
        })
    }
}

impl Gguf {
    /// Opens and checks `path` (memory-mapped; the file must not change while it is open).
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| invalid!("{}: cannot open: {e}", path.display()))?;
        // SAFETY: the mapping is read-only; a file truncated underneath it could fault, which
        // the format cannot prevent (every reader of mmapped model files shares this caveat).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| invalid!("{}: cannot map: {e}", path.display()))?;
        Self::parse(path.to_path_buf(), Bytes::Mapped(map))
    }

    /// Parses a GGUF image held in memory (tests, fuzzing).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Gguf> {
        Self::parse(PathBuf::from(name), Bytes::Owned(bytes))
    }

    fn parse(path: PathBuf, bytes: Bytes) -> Result<Gguf> {
        let mut c = Cursor { bytes: &bytes, pos: 0, file: &path };
        if c.take(4, "magic")? != MAGIC {
            return Err(c.err("the magic is not \"GGUF\""));
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(c.err(format_args!("version {version} (this reader takes GGUF v2 and v3)")));
        }
        let tensor_count = c.u64("tensor count")?;
        let kv_count = c.u64("metadata count")?;
        // A key takes ≥ 13 bytes (length, type, 1-byte value) and a tensor info ≥ 24.
        let left = (c.bytes.len() - c.pos) as u64;
        if kv_count > left / 13 || tensor_count > left / 24 {
            return Err(c.err(format_args!("{kv_count} keys and {tensor_count} tensors cannot fit in {left} bytes")));
        }
        let mut metadata = BTreeMap::new();
        for _ in 0..kv_count {
            let key = c.string("metadata key")?;
            let type_id = c.u32("metadata value type")?;
            let value = c.value(type_id, 0, &format!("metadata {key:?}"))?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(c.err(format_args!("metadata key {key:?} appears twice")));
            }
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 20 => a,
                _ => return Err(c.err(format_args!("general.alignment is {}, not a power of two up to 1 MiB", v.describe()))),
            },
        };
        let mut tensors = Vec::with_capacity(tensor_count as usize);
        let mut by_name = BTreeMap::new();
        for i in 0..tensor_count {
            let name = c.string("tensor name")?;
            let n_dims = c.u32("tensor dimension count")? as usize;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(c.err(format_args!("tensor {name:?} has {n_dims} dimensions (1 to {MAX_DIMS})")));
            }
            let mut dims = Vec::with_capacity(n_dims);
            for _ in 0..n_dims {
                dims.push(c.u64("tensor dimension")?);
            }
            let type_id = c.u32("tensor type")?;
            let rel = c.u64("tensor offset")?;
            let ggml_type = GgmlType::from_id(type_id);
            let elements = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            let elements = match elements {
                Some(e) if e <= i64::MAX as u64 => e,
                _ => return Err(c.err(format_args!("tensor {name:?} dimensions {dims:?} overflow"))),
            };
            let size = match ggml_type {
                Some(t) => {
                    if dims[0] % t.block_size() != 0 {
                        return Err(c.err(format_args!(
                            "tensor {name:?} ({}) has rows of {} values, not a multiple of its block size {}",
                            t.name(),
                            dims[0],
                            t.block_size()
                        )));
                    }
                    (elements / t.block_size()).checked_mul(t.block_bytes()).ok_or_else(|| c.err(format_args!("tensor {name:?} size overflows")))?
                }
                None => 0,
            };
            if rel % alignment != 0 {
                return Err(c.err(format_args!("tensor {name:?} offset {rel} is not a multiple of the alignment {alignment}")));
            }
            if by_name.insert(name.clone(), i as usize).is_some() {
                return Err(c.err(format_args!("tensor {name:?} appears twice")));
            }
            tensors.push(TensorInfo { name, dims, ggml_type, type_id, offset: rel, size });
        }
        let data_offset = (c.pos as u64).div_ceil(alignment) * alignment;
        let file_len = c.bytes.len() as u64;
        for t in &mut tensors {
            let start = data_offset.checked_add(t.offset);
            let end = start.and_then(|s| s.checked_add(t.size));
            match (start, end) {
                (Some(s), Some(e)) if e <= file_len => t.offset = s,
                _ => {
                    return Err(invalid!(
                        "{}: not a valid GGUF file: tensor {:?} ({} bytes at data offset {}) lies beyond the end of the file ({file_len} bytes; truncated?)",
                        path.display(),
                        t.name,
                        t.size,
                        t.offset
                    ))
                }
            }
        }
        let mut extents: Vec<(u64, u64, &str)> = tensors.iter().filter(|t| t.size > 0).map(|t| (t.offset, t.offset + t.size, t.name.as_str())).collect();
        extents.sort_unstable();
        for w in extents.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(invalid!("{}: not a valid GGUF file: tensors {:?} and {:?} overlap", path.display(), w[0].2, w[1].2));
            }
        }
        drop(extents);
        Ok(Gguf { path, version, alignment, metadata, tensors, by_name, data_offset, bytes })
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// The mapped bytes of `t` (checked at open to lie inside the file).
    pub fn tensor_bytes(&self, t: &TensorInfo) -> &[u8] {
        &self.bytes[t.offset as usize..(t.offset + t.size) as usize]
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    fn typed<'a, T: 'a>(&'a self, key: &str, kind: &str, f: impl FnOnce(&'a MetaValue) -> Option<T>) -> Result<Option<T>> {
        match self.metadata.get(key) {
            None => Ok(None),
            Some(v) => f(v).map(Some).ok_or_else(|| invalid!("{}: metadata {key:?} is {}, expected {kind}", self.path.display(), v.describe())),
        }
    }

    /// An optional unsigned integer; present with another type is an error.
    pub fn u64(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "an unsigned integer", MetaValue::as_u64)
    }

    pub fn f64(&self, key: &str) -> Result<Option<f64>> {
        self.typed(key, "a number", MetaValue::as_f64)
    }

    pub fn str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "a string", MetaValue::as_str)
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "a bool", MetaValue::as_bool)
    }

    pub fn array(&self, key: &str) -> Result<Option<&[MetaValue]>> {
        self.typed(key, "an array", MetaValue::as_array)
    }

    /// A required unsigned integer.
    pub fn require_u64(&self, key: &str) -> Result<u64> {
        self.u64(key)?.ok_or_else(|| invalid!("{}: metadata {key:?} is missing", self.path.display()))
    }

    /// An array of strings (tokens, merges).
    pub fn strings(&self, key: &str) -> Result<Option<Vec<&str>>> {
        let Some(items) = self.array(key)? else { return Ok(None) };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| v.as_str().ok_or_else(|| invalid!("{}: metadata {key:?}[{i}] is {}, expected a string", self.path.display(), v.type_name())))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// The file's total size in bytes.
    pub fn file_size(&self) -> u64 {
        self.bytes.len() as u64
    }
}
