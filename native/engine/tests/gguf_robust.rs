//! The GGUF reader on hostile input: every damaged file is an `Err`, never a panic, an
//! out-of-bounds read or an allocation sized by the file.
//!
//! Seeded mutations of every fixture in `test/llm/fixtures/` (truncation at every header offset,
//! bit flips, byte overwrites, hostile values in every count, length, type, dimension and offset
//! field, invalid UTF-8, overlapping and unaligned tensor offsets), synthetic files (deep nested
//! arrays, huge counts, every value and tensor type id), and hand-written cases with their exact
//! error messages. Each input goes through `exercise::exercise`: parse, and where that succeeds,
//! config, every tensor's bytes and a few dequantized blocks. A counting allocator bounds the
//! memory each parse may take by the input's size. No GPU. The `gguf_parse` fuzz target in
//! `native/fuzz` runs the same checks on libFuzzer's inputs.

#[path = "gguf_robust/exercise.rs"]
mod exercise;

use exercise::{exercise, Outcome};
use nx_vulkan_engine::llm::Gguf;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------------
// Memory: a counting allocator, per thread (the test harness runs tests on several threads).

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping touches
// only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size() as isize);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size() as isize);
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        note(-(l.size() as isize));
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new as isize - l.size() as isize);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap a parse may hold beyond its input: a metadata value is 32 bytes in memory and can take
/// one byte in the file (an array of u8 or bool), so growth is linear with that slope at most.
fn memory_cap(input: usize) -> isize {
    (40 * input + (4 << 20)) as isize
}

/// Tallies of one family of cases.
#[derive(Default, Debug)]
struct Tally {
    cases: u64,
    refused: u64,
    parsed: u64,
    configured: u64,
    /// Largest heap growth seen, per byte of input plus 4 KiB (so that tiny inputs, whose
    /// error message alone outweighs them, do not dominate).
    worst_ratio: f64,
}

impl Tally {
    /// Runs one case; on a panic or a broken memory bound, saves the input and fails naming it.
    fn run(&mut self, what: &str, bytes: Vec<u8>) -> Outcome {
        let len = bytes.len();
        let copy = bytes.clone();
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise("case.gguf", bytes)));
        // The input itself (moved into the parse) was already counted in `base`.
        let grew = PEAK.with(Cell::get) - base;
        let outcome = match r {
            Ok(o) => o,
            Err(_) => fail(what, &copy, "panicked (message above)"),
        };
        if grew > memory_cap(len) {
            fail(what, &copy, &format!("took {grew} bytes of heap for a {len}-byte input"));
        }
        self.cases += 1;
        self.worst_ratio = self.worst_ratio.max(grew as f64 / (len + 4096) as f64);
        match outcome {
            Outcome::Refused => self.refused += 1,
            Outcome::ParsedNoConfig => self.parsed += 1,
            Outcome::ParsedWithConfig => {
                self.parsed += 1;
                self.configured += 1
            }
        }
        outcome
    }
}

fn fail(what: &str, bytes: &[u8], why: &str) -> ! {
    let path = std::env::temp_dir().join(format!("gguf_robust_{}.gguf", what.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
    let _ = std::fs::write(&path, bytes);
    panic!("{what}: {why}; input saved to {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// Fixtures and a trusted walk of their layout (where every field lies).

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test/llm/fixtures");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 17, "expected the 17 fixture models in {}", dir.display());
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Version,
    TensorCount,
    KvCount,
    KeyLen,
    ValueType,
    StrLen,
    ArrayType,
    ArrayCount,
    Scalar,
    NameLen,
    NDims,
    Dim,
    TensorType,
    TensorOffset,
}

/// One field of a fixture: where it is, how wide, what it means, whether it is an array element.
#[derive(Clone, Copy, Debug)]
struct Site {
    at: usize,
    width: usize,
    kind: Kind,
    in_array: bool,
}

#[derive(Default)]
struct FileLayout {
    sites: Vec<Site>,
    /// Byte ranges of string payloads (keys, values, tensor names), with whether in an array.
    strings: Vec<(usize, usize, bool)>,
    /// End of the tensor infos (the data section starts at the next alignment boundary).
    header_end: usize,
    /// Relative tensor offsets as written.
    offsets: Vec<u64>,
}

struct Walker<'a> {
    b: &'a [u8],
    p: usize,
    l: FileLayout,
}

impl Walker<'_> {
    fn field(&mut self, width: usize, kind: Kind, in_array: bool) -> u64 {
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(&self.b[self.p..self.p + width]);
        self.l.sites.push(Site { at: self.p, width, kind, in_array });
        self.p += width;
        u64::from_le_bytes(v)
    }

    fn string(&mut self, kind: Kind, in_array: bool) {
        let n = self.field(8, kind, in_array) as usize;
        self.l.strings.push((self.p, self.p + n, in_array));
        self.p += n;
    }

    fn value(&mut self, ty: u64, in_array: bool) {
        match ty {
            0 | 1 | 7 => drop(self.field(1, Kind::Scalar, in_array)),
            2 | 3 => drop(self.field(2, Kind::Scalar, in_array)),
            4..=6 => drop(self.field(4, Kind::Scalar, in_array)),
            10..=12 => drop(self.field(8, Kind::Scalar, in_array)),
            8 => self.string(Kind::StrLen, in_array),
            9 => {
                let elem = self.field(4, Kind::ArrayType, in_array);
                for _ in 0..self.field(8, Kind::ArrayCount, in_array) {
                    self.value(elem, true);
                }
            }
            t => panic!("fixture has value type {t}"),
        }
    }
}

/// Walks a valid fixture (trusted: it is ours) and records every field.
fn walk(b: &[u8]) -> FileLayout {
    let mut w = Walker { b, p: 4, l: FileLayout::default() };
    w.field(4, Kind::Version, false);
    let n_tensors = w.field(8, Kind::TensorCount, false);
    let n_kv = w.field(8, Kind::KvCount, false);
    for _ in 0..n_kv {
        w.string(Kind::KeyLen, false);
        let ty = w.field(4, Kind::ValueType, false);
        w.value(ty, false);
    }
    for _ in 0..n_tensors {
        w.string(Kind::NameLen, false);
        for _ in 0..w.field(4, Kind::NDims, false) {
            w.field(8, Kind::Dim, false);
        }
        w.field(4, Kind::TensorType, false);
        let off = w.field(8, Kind::TensorOffset, false);
        w.l.offsets.push(off);
    }
    w.l.header_end = w.p;
    w.l
}

/// A fixture with the same metadata, tensor names, types and ranks, but one block of data per
/// tensor (≈15 KB instead of ≈600 KB): mutating it exercises the same header and every quant
/// type for a fraction of the copying. It parses and configures like the fixture.
fn slim(bytes: &[u8]) -> Vec<u8> {
    let l = walk(bytes);
    let g = Gguf::from_bytes("fixture", bytes.to_vec()).unwrap();
    let kv_end = l.sites.iter().find(|s| s.kind == Kind::NameLen).map_or(l.header_end, |s| s.at);
    let mut b = Builder::new();
    (b.kv, b.n_kv) = (bytes[24..kv_end].to_vec(), g.metadata.len() as u64);
    let mut data = Vec::new();
    for t in &g.tensors {
        let ty = t.ggml_type.unwrap();
        let mut dims = vec![1u64; t.dims.len()];
        dims[0] = ty.block_size().max(32);
        let (start, n) = (data.len(), (dims[0] / ty.block_size() * ty.block_bytes()) as usize);
        b = b.tensor(&t.name, &dims, ty.id(), start as u64);
        let src = g.tensor_bytes(t);
        data.extend_from_slice(&src[..n.min(src.len())]);
        data.resize((start + n).next_multiple_of(32), 0);
    }
    b.data(&data).build()
}

fn read_le(b: &[u8], at: usize, width: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(&b[at..at + width]);
    u64::from_le_bytes(v)
}

fn write_le(b: &mut [u8], at: usize, width: usize, v: u64) {
    b[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
}

/// Values an attacker would put in a field: boundaries, powers of two, near-originals, sizes of
/// the file; truncated to the field's width, the original left out.
fn hostile_values(orig: u64, width: usize, kind: Kind, file_len: u64, at: u64) -> Vec<u64> {
    let mut v = vec![
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        13,
        16,
        31,
        33,
        0x7F,
        0x80,
        0xFF,
        0x7FFF,
        0xFFFF,
        0x7FFF_FFFF,
        0x8000_0000,
        0xFFFF_FFFF,
        1 << 32,
        1 << 40,
        1 << 60,
        (1 << 63) - 1,
        1 << 63,
        u64::MAX,
        orig.wrapping_add(1),
        orig.wrapping_sub(1),
        orig.wrapping_mul(2),
        orig ^ (1 << 63),
        file_len,
        file_len - at,
        file_len - at + 1,
    ];
    match kind {
        Kind::ValueType | Kind::ArrayType => v.extend(0..=20),
        Kind::TensorType => v.extend(0..=40),
        Kind::NDims => v.extend([6, 8, 64]),
        Kind::TensorOffset => v.extend([orig + 16, orig + 32, orig + 64, orig.saturating_sub(32)]),
        _ => {}
    }
    let mask = if width == 8 { u64::MAX } else { (1u64 << (8 * width)) - 1 };
    let mut v: Vec<u64> = v.into_iter().map(|x| x & mask).filter(|&x| x != orig).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// SplitMix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn report(name: &str, t: &Tally, started: std::time::Instant) {
    eprintln!(
        "{name}: {} cases in {:.1} s — {} refused, {} parsed ({} with a config); heap growth ≤ {:.1}× (input + 4 KiB)",
        t.cases,
        started.elapsed().as_secs_f64(),
        t.refused,
        t.parsed,
        t.configured,
        t.worst_ratio
    );
}

// ---------------------------------------------------------------------------------------------
// Mutations of the fixtures.

#[test]
fn fixtures_parse_and_configure() {
    let mut t = Tally::default();
    for (name, bytes) in fixtures() {
        assert_eq!(t.run(&name, slim(&bytes)), Outcome::ParsedWithConfig, "{name} (slim)");
        assert_eq!(t.run(&name, bytes), Outcome::ParsedWithConfig, "{name}");
    }
}

/// Writes the slim fixtures to `$GGUF_FUZZ_SEEDS` as a seed corpus (scripts/fuzz.sh runs this).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    let dir = PathBuf::from(std::env::var("GGUF_FUZZ_SEEDS").expect("GGUF_FUZZ_SEEDS: the corpus directory"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in fixtures() {
        std::fs::write(dir.join(format!("{name}.slim.gguf")), slim(&bytes)).unwrap();
    }
}

/// Truncation at every offset of the header and the first bytes of the data section, at every
/// tensor's boundaries, and at random offsets.
#[test]
fn truncations() {
    let started = std::time::Instant::now();
    let mut t = Tally::default();
    let mut rng = Rng(1);
    for (name, bytes) in fixtures() {
        let l = walk(&bytes);
        let g = Gguf::from_bytes(&name, bytes.clone()).unwrap();
        let mut cuts: Vec<usize> = (0..=l.header_end + 64).collect();
        for ti in &g.tensors {
            let (s, e) = (ti.offset as usize, (ti.offset + ti.size) as usize);
            cuts.extend([s - 1, s, s + 1, e - 1, e + 1]);
        }
        cuts.extend((0..200).map(|_| rng.below(bytes.len())));
        cuts.retain(|&c| c < bytes.len());
        for c in cuts {
            let o = t.run(&format!("{name}-cut{c}"), bytes[..c].to_vec());
            // Cutting anywhere but the unused padding after the last tensor loses data.
            if c < g.tensors.iter().map(|ti| (ti.offset + ti.size) as usize).max().unwrap() {
                assert_eq!(o, Outcome::Refused, "{name} cut at {c} parsed");
            }
        }
    }
    report("truncations", &t, started);
    assert!(t.cases > 150_000);
}

/// Every structural field (counts, lengths, type ids, dimension counts, dimensions, offsets and
/// top-level scalars) set to each hostile value; a sample of array-element fields likewise.
#[test]
fn hostile_fields() {
    let started = std::time::Instant::now();
    let mut t = Tally::default();
    let mut rng = Rng(2);
    for (name, bytes) in fixtures() {
        let bytes = slim(&bytes);
        let l = walk(&bytes);
        let len = bytes.len() as u64;
        let mut sites: Vec<Site> = l.sites.iter().copied().filter(|s| !s.in_array).collect();
        let elems: Vec<Site> = l.sites.iter().copied().filter(|s| s.in_array).collect();
        sites.extend((0..40).map(|_| elems[rng.below(elems.len())]));
        for s in sites {
            let orig = read_le(&bytes, s.at, s.width);
            for v in hostile_values(orig, s.width, s.kind, len, s.at as u64) {
                let mut m = bytes.clone();
                write_le(&mut m, s.at, s.width, v);
                t.run(&format!("{name}-{:?}@{}={v}", s.kind, s.at), m);
            }
        }
        // Each tensor moved onto another's offset (overlap) and off the alignment.
        let offs: Vec<Site> = l.sites.iter().copied().filter(|s| s.kind == Kind::TensorOffset).collect();
        for (i, s) in offs.iter().enumerate() {
            for v in [l.offsets[(i + 1) % offs.len()], l.offsets[0], l.offsets[i] + 1, l.offsets[i] + 8] {
                let mut m = bytes.clone();
                write_le(&mut m, s.at, 8, v);
                let o = t.run(&format!("{name}-offset{i}={v}"), m);
                assert_eq!(o == Outcome::Refused, v != l.offsets[i], "{name}: tensor {i} at offset {v}");
            }
        }
    }
    report("hostile fields", &t, started);
    assert!(t.cases > 50_000);
}

/// Invalid UTF-8 in keys, string values and tensor names: refused.
#[test]
fn invalid_utf8_strings() {
    let mut t = Tally::default();
    let mut rng = Rng(3);
    for (name, bytes) in fixtures() {
        let bytes = slim(&bytes);
        let l = walk(&bytes);
        let mut strings: Vec<_> = l.strings.iter().copied().filter(|s| !s.2 && s.1 > s.0).collect();
        let elems: Vec<_> = l.strings.iter().copied().filter(|s| s.2 && s.1 > s.0).collect();
        strings.extend((0..30).map(|_| elems[rng.below(elems.len())]));
        for (a, b, _) in strings {
            // A lone continuation byte, an overlong lead, a truncated sequence, a surrogate.
            let patches: [&[(usize, u8)]; 4] = [&[(a, 0x80)], &[(a, 0xC0)], &[(b - 1, 0xE2)], &[(a, 0xFF)]];
            for p in patches {
                let mut m = bytes.clone();
                for &(at, byte) in p {
                    m[at] = byte;
                }
                assert_eq!(t.run(&format!("{name}-utf8@{a}"), m), Outcome::Refused, "{name}: bad UTF-8 at {a}");
            }
            if b - a >= 3 {
                let mut m = bytes.clone();
                m[a..a + 3].copy_from_slice(&[0xED, 0xA0, 0x80]);
                assert_eq!(t.run(&format!("{name}-surrogate@{a}"), m), Outcome::Refused);
            }
        }
    }
}

/// Random stacks of 1–6 edits, mostly in the header: bit flips, special bytes, hostile words,
/// insertions, deletions, truncation, and noise in tensor data (NaN/Inf blocks for dequantize).
#[test]
fn random_mutations() {
    let t = mutate_randomly(true, 3000, 4);
    assert!(t.parsed > 1000 && t.refused > 10_000, "{t:?}");
}

/// The same on the full fixtures (real tensor layout; fewer cases, each copies ≈600 KB).
#[test]
fn random_mutations_full_size() {
    let t = mutate_randomly(false, 150, 5);
    assert!(t.parsed > 100 && t.refused > 1000, "{t:?}");
}

fn mutate_randomly(slim_images: bool, per_fixture: usize, seed: u64) -> Tally {
    let started = std::time::Instant::now();
    let mut t = Tally::default();
    let mut rng = Rng(seed);
    const SPECIAL: [u8; 7] = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE, 0x20];
    for (name, bytes) in fixtures() {
        let bytes = if slim_images { slim(&bytes) } else { bytes };
        let l = walk(&bytes);
        let h = l.header_end;
        for case in 0..per_fixture {
            let mut m = bytes.clone();
            for _ in 0..1 + rng.below(6) {
                let hh = h.min(m.len());
                match rng.below(100) {
                    0..=34 => {
                        let at = rng.below(hh);
                        m[at] ^= 1 << rng.below(8);
                    }
                    35..=44 => {
                        let at = rng.below(m.len());
                        m[at] ^= 1 << rng.below(8);
                    }
                    45..=59 => {
                        let at = rng.below(hh);
                        m[at] = SPECIAL[rng.below(SPECIAL.len())];
                    }
                    60..=74 => {
                        let s = l.sites[rng.below(l.sites.len())];
                        if s.at + s.width <= m.len() {
                            let vals = hostile_values(read_le(&m, s.at, s.width), s.width, s.kind, m.len() as u64, s.at as u64);
                            write_le(&mut m, s.at, s.width, vals[rng.below(vals.len())]);
                        }
                    }
                    75..=82 => {
                        let at = rng.below(hh);
                        let n = 1 + rng.below(16);
                        let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                        m.splice(at..at, ins);
                    }
                    83..=90 => {
                        let at = rng.below(hh);
                        let n = (1 + rng.below(16)).min(m.len() - at);
                        m.drain(at..at + n);
                    }
                    91..=93 => m.truncate(rng.below(m.len())),
                    _ => {
                        let at = h + rng.below(m.len().saturating_sub(h).max(1));
                        for b in m.iter_mut().skip(at).take(64) {
                            *b = rng.next() as u8;
                        }
                    }
                }
                if m.is_empty() {
                    break;
                }
            }
            t.run(&format!("{name}-random{case}"), m);
        }
    }
    report(if slim_images { "random mutations" } else { "random mutations (full size)" }, &t, started);
    t
}

// ---------------------------------------------------------------------------------------------
// Synthetic files.

/// Writes small GGUF images field by field.
struct Builder {
    version: u32,
    kv: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
    alignment: usize,
    data: Vec<u8>,
}

fn lp(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

impl Builder {
    fn new() -> Builder {
        Builder { version: 3, kv: vec![], n_kv: 0, infos: vec![], n_tensors: 0, alignment: 32, data: vec![] }
    }

    /// A key with a raw type id and payload.
    fn kv(mut self, key: &[u8], ty: u32, payload: &[u8]) -> Builder {
        self.kv.extend(lp(key));
        self.kv.extend(ty.to_le_bytes());
        self.kv.extend_from_slice(payload);
        self.n_kv += 1;
        self
    }

    fn kv_u32(self, key: &str, v: u32) -> Builder {
        self.kv(key.as_bytes(), 4, &v.to_le_bytes())
    }

    fn kv_str(self, key: &str, s: &str) -> Builder {
        self.kv(key.as_bytes(), 8, &lp(s.as_bytes()))
    }

    fn tensor(mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Builder {
        self.infos.extend(lp(name.as_bytes()));
        self.infos.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(ty.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    fn data(mut self, bytes: &[u8]) -> Builder {
        self.data.extend_from_slice(bytes);
        self
    }

    fn header(&self) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(self.version.to_le_bytes());
        b.extend(self.n_tensors.to_le_bytes());
        b.extend(self.n_kv.to_le_bytes());
        b.extend_from_slice(&self.kv);
        b.extend_from_slice(&self.infos);
        b
    }

    fn build(&self) -> Vec<u8> {
        let mut b = self.header();
        b.resize(b.len().next_multiple_of(self.alignment), 0);
        b.extend_from_slice(&self.data);
        b
    }
}

/// An array value payload: element type, count, elements.
fn array(elem: u32, count: u64, elems: &[u8]) -> Vec<u8> {
    let mut v = elem.to_le_bytes().to_vec();
    v.extend(count.to_le_bytes());
    v.extend_from_slice(elems);
    v
}

fn parse_err(bytes: Vec<u8>) -> String {
    match Gguf::from_bytes("t.gguf", bytes) {
        Ok(g) => panic!("parsed: {g:?}"),
        Err(e) => e.to_string(),
    }
}

/// Arrays nested 1–12 deep, with small and huge counts at each level; huge counts of every
/// element type; huge string lengths; every value type id; every tensor type id and dimension
/// count.
#[test]
fn synthetic_files() {
    let mut t = Tally::default();
    for depth in 1..=12usize {
        for (count, inner) in [(1u64, 1u64), (2, 0), (1, 1 << 60), (1 << 60, 1), (u64::MAX, 0)] {
            let mut payload = array(0, inner, &[7u8; 1][..inner.min(1) as usize]);
            for _ in 1..depth {
                let copies = if count <= 2 { payload.repeat(count as usize) } else { payload.clone() };
                payload = array(9, count, &copies);
            }
            let o = t.run(&format!("nested{depth}x{count}x{inner}"), Builder::new().kv(b"a", 9, &payload).build());
            let fits = inner <= 1 && (depth == 1 || count <= 2);
            assert_eq!(o != Outcome::Refused, depth <= 4 && fits, "depth {depth}, counts {count}/{inner}");
        }
    }
    for elem in (0..=20u32).chain([255, u32::MAX]) {
        for count in [1u64 << 60, 1 << 63, u64::MAX, 1 << 32, 17] {
            t.run(&format!("array{elem}x{count}"), Builder::new().kv(b"a", 9, &array(elem, count, &[0; 16])).build());
        }
    }
    for len in [1u64 << 60, 1 << 63, u64::MAX, u32::MAX as u64 + 1, 100] {
        let mut s = len.to_le_bytes().to_vec();
        s.extend([b'x'; 16]);
        let mut key = Builder::new();
        (key.kv, key.n_kv) = (s.clone(), 1);
        assert_eq!(t.run("key len", key.build()), Outcome::Refused);
        assert_eq!(t.run("value len", Builder::new().kv(b"a", 8, &s).build()), Outcome::Refused);
        let mut name = Builder::new();
        (name.infos, name.n_tensors) = ([&s[..], &[1, 0, 0, 0]].concat(), 1);
        assert_eq!(t.run("tensor name len", name.build()), Outcome::Refused);
    }
    for ty in (0..=20u32).chain([255, 0x8000_0000, u32::MAX]) {
        t.run(&format!("value type {ty}"), Builder::new().kv(b"a", ty, &[1; 24]).build());
    }
    for ty in (0..=40u32).chain([255, u32::MAX]) {
        for dims in [&[256u64][..], &[256, 3], &[0], &[256, 0, 5], &[1 << 32, 1 << 32], &[u64::MAX], &[256, 1, 1, 1], &[256, 1, 1, 1, 1], &[]] {
            let b = Builder::new().tensor("w", dims, ty, 0).data(&[0x3C; 2048]);
            t.run(&format!("tensor type {ty} {dims:?}"), b.build());
        }
    }
    eprintln!("synthetic files: {t:?}");
}

// ---------------------------------------------------------------------------------------------
// Hand-written cases, exact messages.

/// `t.gguf: not a valid GGUF file: {what} (at byte {at})`.
fn bad(what: &str, at: usize) -> String {
    format!("t.gguf: not a valid GGUF file: {what} (at byte {at})")
}

#[test]
fn header_errors() {
    assert_eq!(parse_err(vec![]), bad("magic needs 4 bytes, 0 left (truncated?)", 0));
    assert_eq!(parse_err(b"GGU".to_vec()), bad("magic needs 4 bytes, 3 left (truncated?)", 0));
    let mut b = Builder::new().build();
    b[3] = b'X';
    assert_eq!(parse_err(b), bad("the magic is not \"GGUF\"", 4));
    let mut v1 = Builder::new();
    v1.version = 1;
    assert_eq!(parse_err(v1.build()), bad("version 1 (this reader takes GGUF v2 and v3)", 8));
    v1.version = 4;
    assert_eq!(parse_err(v1.build()), bad("version 4 (this reader takes GGUF v2 and v3)", 8));
    assert_eq!(parse_err(Builder::new().header()[..8].to_vec()), bad("tensor count needs 8 bytes, 0 left (truncated?)", 8));
    assert_eq!(parse_err(Builder::new().header()[..20].to_vec()), bad("metadata count needs 8 bytes, 4 left (truncated?)", 16));
    let mut huge = Builder::new();
    huge.n_kv = 1 << 60;
    assert_eq!(parse_err(huge.header()), bad("1152921504606846976 keys and 0 tensors cannot fit in 0 bytes", 24));
    let mut huge = Builder::new();
    huge.n_tensors = u64::MAX;
    assert_eq!(parse_err(huge.build()), bad("0 keys and 18446744073709551615 tensors cannot fit in 8 bytes", 24));
}

#[test]
fn metadata_errors() {
    // key "a" at 24: length (8), "a", type (4): the value starts at byte 37.
    let one = |ty: u32, payload: &[u8]| parse_err(Builder::new().kv(b"a", ty, payload).header());
    assert_eq!(one(13, &[0; 8]), bad("metadata \"a\": unknown value type 13", 37));
    assert_eq!(one(7, &[2]), bad("metadata \"a\": bool byte 2", 38));
    assert_eq!(one(4, &[0; 3]), bad("metadata \"a\" needs 4 bytes, 3 left (truncated?)", 37));
    assert_eq!(
        one(9, &array(0, 1 << 60, &[0; 3])),
        bad("metadata \"a\": array of 1152921504606846976 elements does not fit in the 3 bytes left", 49)
    );
    assert_eq!(one(9, &array(8, 2, &[0; 15])), bad("metadata \"a\": array of 2 elements does not fit in the 15 bytes left", 49));
    assert_eq!(one(9, &array(13, 1, &[0; 8])), bad("metadata \"a\": unknown array element type 13", 49));
    let mut deep = array(0, 0, &[]);
    for _ in 0..5 {
        deep = array(9, 1, &deep);
    }
    assert_eq!(one(9, &deep), bad("metadata \"a\": arrays nested deeper than 4", 49 + 3 * 12));
    assert_eq!(one(8, &lp(b"\xC3\x28")), bad("metadata \"a\" is not UTF-8", 45));
    assert_eq!(parse_err(Builder::new().kv(b"\xFF", 0, &[0]).header()), bad("metadata key is not UTF-8", 32));
    assert_eq!(
        parse_err(Builder::new().kv_u32("a", 1).kv_u32("a", 2).build()),
        bad("metadata key \"a\" appears twice", 58)
    );
    assert_eq!(
        parse_err(Builder::new().kv_u32("general.alignment", 48).build()),
        bad("general.alignment is u32 48, not a power of two up to 1 MiB", 57)
    );
    assert_eq!(
        parse_err(Builder::new().kv_str("general.alignment", "x").build()),
        bad("general.alignment is string \"x\", not a power of two up to 1 MiB", 62)
    );
    // Refused values are described briefly, not dumped: a 1 MiB array is named by its length.
    let big = Builder::new().kv(b"general.alignment", 9, &array(0, 1 << 20, &vec![0; 1 << 20])).build();
    assert_eq!(parse_err(big), bad("general.alignment is an array of 1048576 u8, not a power of two up to 1 MiB", 1048641));
}

#[test]
fn tensor_errors() {
    // A tensor info "w" at 24: name (9), n_dims (4), dims (8 each), type (4), offset (8).
    let t = |dims: &[u64], ty: u32, offset: u64, data: usize| parse_err(Builder::new().tensor("w", dims, ty, offset).data(&vec![0; data]).build());
    assert_eq!(t(&[1; 5], 0, 0, 0), bad("tensor \"w\" has 5 dimensions (1 to 4)", 37));
    assert_eq!(t(&[], 0, 0, 0), bad("tensor \"w\" has 0 dimensions (1 to 4)", 37));
    assert_eq!(t(&[1 << 32, 1 << 32], 0, 0, 0), bad("tensor \"w\" dimensions [4294967296, 4294967296] overflow", 65));
    assert_eq!(t(&[31], 2, 0, 64), bad("tensor \"w\" (Q4_0) has rows of 31 values, not a multiple of its block size 32", 57));
    assert_eq!(t(&[8], 0, 4, 64), bad("tensor \"w\" offset 4 is not a multiple of the alignment 32", 57));
    assert_eq!(
        t(&[8], 0, 0, 16),
        "t.gguf: not a valid GGUF file: tensor \"w\" (32 bytes at data offset 0) lies beyond the end of the file (80 bytes; truncated?)"
    );
    assert_eq!(
        t(&[8], 0, u64::MAX - 31, 64),
        "t.gguf: not a valid GGUF file: tensor \"w\" (32 bytes at data offset 18446744073709551584) lies beyond the end of the file (128 bytes; truncated?)"
    );
    let two = |b_offset: u64| parse_err(Builder::new().tensor("a", &[16], 0, 0).tensor("b", &[8], 0, b_offset).data(&[0; 128]).build());
    assert_eq!(two(32), "t.gguf: not a valid GGUF file: tensors \"a\" and \"b\" overlap");
    assert_eq!(two(0), "t.gguf: not a valid GGUF file: tensors \"b\" and \"a\" overlap");
    assert_eq!(
        parse_err(Builder::new().tensor("a", &[8], 0, 0).tensor("a", &[8], 0, 32).data(&[0; 64]).build()),
        bad("tensor \"a\" appears twice", 90)
    );
}

#[test]
fn valid_small_files() {
    let data: Vec<u8> = (0..96u8).collect();
    let b = Builder::new().kv_u32("general.alignment", 64).kv_str("general.name", "tiny").tensor("a", &[8], 0, 0).tensor("b", &[32, 1], 2, 64).tensor("odd", &[3], 4, 0);
    let mut b = b.data(&data);
    b.alignment = 64;
    let g = Gguf::from_bytes("t.gguf", b.build()).unwrap();
    assert_eq!((g.version, g.alignment, g.data_offset % 64), (3, 64, 0));
    assert_eq!(g.str("general.name").unwrap(), Some("tiny"));
    assert_eq!(g.u64("general.name").unwrap_err().to_string(), "t.gguf: metadata \"general.name\" is string \"tiny\", expected an unsigned integer");
    assert_eq!(g.str("general.alignment").unwrap_err().to_string(), "t.gguf: metadata \"general.alignment\" is u32 64, expected a string");
    assert_eq!(g.tensor_bytes(g.tensor("a").unwrap()), &data[..32]);
    assert_eq!(g.tensor_bytes(g.tensor("b").unwrap()), &data[64..82]);
    // An unknown type id (4 was ggml's Q4_2) parses, with no size, and is named by its id.
    let odd = g.tensor("odd").unwrap();
    assert_eq!((odd.ggml_type, odd.size, odd.type_name().as_str()), (None, 0, "type 4"));
    let mut v2 = Builder::new().tensor("a", &[8], 0, 0).data(&[0; 32]);
    v2.version = 2;
    assert_eq!(Gguf::from_bytes("t.gguf", v2.build()).unwrap().version, 2);
}

#[test]
fn open_refuses_missing_and_empty_files() {
    let dir = std::env::temp_dir().join(format!("gguf_robust_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.gguf");
    assert!(Gguf::open(&missing).unwrap_err().to_string().starts_with(&format!("{}: cannot open:", missing.display())));
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    let e = Gguf::open(&empty).unwrap_err().to_string();
    assert!(e.starts_with(&empty.display().to_string()), "{e}");
    assert!(Gguf::open(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
