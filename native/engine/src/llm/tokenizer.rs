//! The tokenizer of a GGUF model, built from its `tokenizer.ggml.*` metadata, with llama.cpp's
//! semantics (llama-vocab.cpp, unicode.cpp).
//!
//! Two vocabulary kinds:
//! - `tokenizer.ggml.model = "gpt2"`: byte-level BPE. The text is cut by the pre-tokenizer that
//!   `tokenizer.ggml.pre` names (a list of split regexes, applied one after the other; unmatched
//!   stretches stay pieces of their own, as in llama.cpp's `unicode_regex_split`), each piece's
//!   bytes are mapped to GPT-2's printable characters, then merged by `tokenizer.ggml.merges`
//!   (rank = order; the lowest rank first, the leftmost on a tie). One departure from llama.cpp,
//!   towards the model's own tokenizer: "qwen2" composes the text to Unicode NFC first, as Qwen's
//!   tokenizer.json does (llama.cpp does not).
//! - `tokenizer.ggml.model = "llama"`: SentencePiece BPE (llm_tokenizer_spm): spaces become `▁`,
//!   a `▁` is prefixed when `add_space_prefix` (default true), adjacent pieces are merged by the
//!   highest `tokenizer.ggml.scores` first (leftmost on a tie), and characters with no token fall
//!   back to the `<0xNN>` byte tokens (else `<unk>`).
//!
//! Control (type 3), unknown (2) and user-defined (4) tokens written in the text are split out
//! before any of this, the longest first; control and unknown ones only when `parse_special`.
//! Damaged metadata is an error at [`LlmTokenizer::from_gguf`], never a panic later.

use std::collections::{BinaryHeap, HashMap};

use crate::error::{invalid, Result};
use crate::llm::gguf::Gguf;
use tokenizers::utils::SysRegex;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TYPE_UNDEFINED: i64 = 0;
const TYPE_NORMAL: i64 = 1;
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;
const TYPE_UNUSED: i64 = 5;
const TYPE_BYTE: i64 = 6;

/// The GPT-2 regex, as in HF's ByteLevel pre-tokenizer (llama.cpp's omits the final `|\s+`,
/// which changes nothing: what it alone would match stays an unmatched piece of its own).
const GPT2_RE: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// llama.cpp's LLAMA3 regex (contractions spelled case-insensitively by hand, as llama.cpp does).
pub const LLAMA3_RE: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// llama.cpp's QWEN2 regex: as LLAMA3 but single digits.
pub const QWEN2_RE: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A pre-tokenizer: the regexes llama.cpp applies in turn for one `tokenizer.ggml.pre` family,
/// after Unicode NFC where the family's own tokenizer normalizes so.
struct PreTokenizer {
    name: &'static str,
    regexes: Vec<SysRegex>,
    /// Qwen2's tokenizer.json (and its slow tokenizer) compose the text to NFC first; llama.cpp
    /// skips that, so a decomposed "e\u{301}" would tokenize unlike the model was trained.
    nfc: bool,
}

impl PreTokenizer {
    fn new(name: &'static str, exprs: &[&str]) -> Result<PreTokenizer> {
        let regexes = exprs
            .iter()
            .map(|e| SysRegex::new(e).map_err(|err| invalid!("tokenizer: bad split regex {e:?}: {err}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(PreTokenizer { name, regexes, nfc: false })
    }

    fn with_nfc(mut self) -> PreTokenizer {
        self.nfc = true;
        self
    }

    /// The text as the family's tokenizer sees it: NFC-composed where it normalizes, else as is.
    fn normalize<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        if !self.nfc || text.is_ascii() {
            return std::borrow::Cow::Borrowed(text);
        }
        // The same NFC as HF `tokenizers`' normalizer (the crate the encoder already uses).
        let mut n = tokenizers::NormalizedString::from(text);
        n.nfc();
        std::borrow::Cow::Owned(n.get().to_owned())
    }

    /// The family for a `tokenizer.ggml.pre` value, and whether it whole-word-matches before
    /// merging (llama.cpp's `ignore_merges`) and adds BOS by default.
    fn for_name(pre: &str) -> Result<(PreTokenizer, bool, bool)> {
        Ok(match pre {
            // llama.cpp LLAMA_VOCAB_PRE_TYPE_DEFAULT (also what a missing key means there).
            "default" => (
                PreTokenizer::new(
                    "default",
                    &[
                        r"[\p{P}\$\+<=>\^~\|]+",
                        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                        r"\p{N}+",
                        r"[0-9][0-9][0-9]",
                    ],
                )?,
                false,
                false,
            ),
            "gpt-2" | "phi-2" | "roberta-bpe" => (PreTokenizer::new("gpt-2", &[GPT2_RE])?, false, false),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" => {
                (PreTokenizer::new("smollm", &[r"\p{N}", GPT2_RE])?, false, false)
            }
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" => {
                (PreTokenizer::new("llama3", &[LLAMA3_RE])?, true, true)
            }
            // NFC for Qwen2/2.5/3 (checked on the real vocabulary in tests/llm_tokenizer.rs); not
            // claimed for the other files that share the split regex.
            "qwen2" => (PreTokenizer::new("qwen2", &[QWEN2_RE])?.with_nfc(), false, false),
            "deepseek-r1-qwen" | "megrez" => (PreTokenizer::new("qwen2", &[QWEN2_RE])?, false, false),
            other => {
                return Err(invalid!(
                    "tokenizer: unsupported tokenizer.ggml.pre {other:?} (known: default, gpt-2, phi-2, \
                     roberta-bpe, smollm, starcoder, refact, command-r, codeshell, llama3, llama-v3, \
                     llama-bpe, falcon3, pixtral, qwen2, deepseek-r1-qwen, megrez)"
                ))
            }
        })
    }

    /// Cuts `text` into pieces: each regex in turn splits every piece into its matches and the
    /// unmatched stretches between them.
    fn split<'a>(&self, text: &'a str) -> Vec<&'a str> {
        let mut pieces = vec![text];
        for re in &self.regexes {
            let mut out = Vec::with_capacity(pieces.len() * 2);
            for p in pieces {
                let mut prev = 0;
                for (s, e) in re.find_iter(p) {
                    if s > prev {
                        out.push(&p[prev..s]);
                    }
                    if e > s {
                        out.push(&p[s..e]);
                    }
                    prev = e;
                }
                if prev < p.len() {
                    out.push(&p[prev..]);
                }
            }
            pieces = out;
        }
        pieces
    }
}

/// Splits `text` with one of the known pre-tokenizers by its `tokenizer.ggml.pre` name (for tests
/// and diagnostics; encoding does this internally).
pub fn pre_tokenize<'a>(pre: &str, text: &'a str) -> Result<Vec<&'a str>> {
    Ok(PreTokenizer::for_name(pre)?.0.split(text))
}

/// GPT-2's `bytes_to_unicode`: byte → printable character, and back.
fn byte_chars() -> ([char; 256], HashMap<char, u8>) {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        table[b as usize] = if printable {
            char::from_u32(b).unwrap_or('\0')
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('\0')
        };
    }
    let back = table.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
    (table, back)
}

enum Model {
    /// Byte-level BPE: merges keyed by (left id, right id) → (rank, merged id).
    BytePair {
        pre: PreTokenizer,
        merges: HashMap<(u32, u32), (u32, u32)>,
        ignore_merges: bool,
        byte_char: [char; 256],
        char_byte: HashMap<char, u8>,
    },
    /// SentencePiece BPE: scores per id, `<0xNN>` ids per byte.
    SentencePiece { scores: Vec<f32>, byte_ids: [Option<u32>; 256], add_space_prefix: bool },
}

/// A GGUF model's tokenizer (see the module docs).
pub struct LlmTokenizer {
    model: Model,
    tokens: Vec<String>,
    types: Vec<i64>,
    ids: HashMap<String, u32>,
    /// Control, unknown and user-defined ids, longest text first (llama.cpp's cache_special_tokens).
    specials: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    eog: Vec<u32>,
}

/// Reads an optional token id key, checked against the vocabulary.
fn token_id(g: &Gguf, key: &str, n_vocab: usize) -> Result<Option<u32>> {
    match g.u64(key)? {
        None => Ok(None),
        Some(id) if (id as usize) < n_vocab => Ok(Some(id as u32)),
        Some(id) => Err(invalid!("tokenizer: {key} = {id} is out of range (vocabulary of {n_vocab})")),
    }
}

impl LlmTokenizer {
    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(g: &Gguf) -> Result<LlmTokenizer> {
        let model_name = g
            .str("tokenizer.ggml.model")?
            .ok_or_else(|| invalid!("tokenizer: tokenizer.ggml.model is missing"))?;
        let tokens: Vec<String> = g
            .strings("tokenizer.ggml.tokens")?
            .ok_or_else(|| invalid!("tokenizer: tokenizer.ggml.tokens is missing"))?
            .into_iter()
            .map(str::to_owned)
            .collect();
        let n = tokens.len();
        if n == 0 {
            return Err(invalid!("tokenizer: tokenizer.ggml.tokens is empty"));
        }
        if n > u32::MAX as usize {
            return Err(invalid!("tokenizer: {n} tokens do not fit 32-bit ids"));
        }
        let types: Vec<i64> = match g.array("tokenizer.ggml.token_type")? {
            None => vec![TYPE_NORMAL; n],
            Some(a) => {
                if a.len() != n {
                    return Err(invalid!(
                        "tokenizer: tokenizer.ggml.token_type has {} entries for {n} tokens",
                        a.len()
                    ));
                }
                a.iter()
                    .enumerate()
                    .map(|(i, v)| match v.as_i64() {
                        Some(t) if (TYPE_UNDEFINED..=TYPE_BYTE).contains(&t) => Ok(t),
                        _ => Err(invalid!("tokenizer: token {i} has an unknown token type {v:?}")),
                    })
                    .collect::<Result<_>>()?
            }
        };
        // Later duplicates win, as in llama.cpp's token_to_id map.
        let ids: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();

        let bos = token_id(g, "tokenizer.ggml.bos_token_id", n)?;
        let eos = token_id(g, "tokenizer.ggml.eos_token_id", n)?;
        let unk = token_id(g, "tokenizer.ggml.unknown_token_id", n)?;
        let eot = token_id(g, "tokenizer.ggml.eot_token_id", n)?;
        let eom = token_id(g, "tokenizer.ggml.eom_token_id", n)?;
        for key in ["tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id"] {
            token_id(g, key, n)?;
        }

        let (model, default_add_bos) = match model_name {
            "gpt2" => {
                let pre_name = g.str("tokenizer.ggml.pre")?.unwrap_or("default");
                let (pre, ignore_merges, add_bos) = PreTokenizer::for_name(pre_name)?;
                let merge_list = g
                    .strings("tokenizer.ggml.merges")?
                    .ok_or_else(|| invalid!("tokenizer: tokenizer.ggml.merges is missing (gpt2 model)"))?;
                let mut merges = HashMap::with_capacity(merge_list.len());
                for (rank, m) in merge_list.iter().enumerate() {
                    // llama.cpp splits at the first space after the first byte.
                    let cut = m.char_indices().skip(1).find(|&(_, c)| c == ' ').map(|(i, _)| i);
                    let Some(cut) = cut else {
                        return Err(invalid!("tokenizer: merge {rank} {m:?} is not two tokens separated by a space"));
                    };
                    let (l, r) = (&m[..cut], &m[cut + 1..]);
                    let look = |s: &str| {
                        ids.get(s)
                            .copied()
                            .ok_or_else(|| invalid!("tokenizer: merge {rank} {m:?} refers to unknown token {s:?}"))
                    };
                    let (li, ri) = (look(l)?, look(r)?);
                    let merged = look(&format!("{l}{r}"))?;
                    // The first (lowest-rank) occurrence of a pair counts.
                    merges.entry((li, ri)).or_insert((rank as u32, merged));
                }
                let (byte_char, char_byte) = byte_chars();
                (Model::BytePair { pre, merges, ignore_merges, byte_char, char_byte }, add_bos)
            }
            "llama" => {
                let scores: Vec<f32> = match g.array("tokenizer.ggml.scores")? {
                    None => vec![0.0; n],
                    Some(a) => {
                        if a.len() != n {
                            return Err(invalid!(
                                "tokenizer: tokenizer.ggml.scores has {} entries for {n} tokens",
                                a.len()
                            ));
                        }
                        a.iter()
                            .enumerate()
                            .map(|(i, v)| {
                                v.as_f64()
                                    .map(|x| x as f32)
                                    .ok_or_else(|| invalid!("tokenizer: score {i} is not a number: {v:?}"))
                            })
                            .collect::<Result<_>>()?
                    }
                };
                let mut byte_ids = [None; 256];
                for (b, slot) in byte_ids.iter_mut().enumerate() {
                    *slot = ids.get(&format!("<0x{b:02X}>")).copied();
                }
                let add_space_prefix = g.bool("tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
                (Model::SentencePiece { scores, byte_ids, add_space_prefix }, true)
            }
            other => {
                return Err(invalid!(
                    "tokenizer: unsupported tokenizer model {other:?} (supported: \"gpt2\" byte-level BPE, \
                     \"llama\" SentencePiece BPE)"
                ))
            }
        };
        let add_bos = g.bool("tokenizer.ggml.add_bos_token")?.unwrap_or(default_add_bos);
        let add_eos = g.bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false);

        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                matches!(types[i as usize], TYPE_CONTROL | TYPE_UNKNOWN | TYPE_USER_DEFINED)
                    && !tokens[i as usize].is_empty()
            })
            .collect();
        specials.sort_by(|&a, &b| tokens[b as usize].len().cmp(&tokens[a as usize].len()).then(a.cmp(&b)));

        // End of generation, as llama_vocab's special_eog_ids: eos, eot, eom and the usual
        // end-of-turn control tokens by their text.
        let mut eog: Vec<u32> = [eos, eot, eom].into_iter().flatten().collect();
        for text in [
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "<|eom_id|>",
            "<EOT>",
            "<｜end▁of▁sentence｜>",
        ] {
            if let Some(&id) = ids.get(text) {
                if types[id as usize] == TYPE_CONTROL {
                    eog.push(id);
                }
            }
        }
        eog.sort_unstable();
        eog.dedup();

        Ok(LlmTokenizer { model, tokens, types, ids, specials, bos, eos, unk, add_bos, add_eos, eog })
    }

    /// Text → ids. `add_special`: add BOS / EOS where the model says so
    /// (`tokenizer.ggml.add_bos_token` / `add_eos_token`, defaults per model as llama.cpp).
    /// `parse_special`: control tokens written in the text map to their ids (user-defined tokens
    /// always do, as in llama.cpp).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.push(self.bos.ok_or_else(|| invalid!("tokenizer: the model adds BOS but has no bos_token_id"))?);
        }
        let mut prev_special = true;
        for frag in self.partition(text, parse_special) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    match &self.model {
                        Model::BytePair { pre, .. } => {
                            let t = pre.normalize(t);
                            for piece in pre.split(&t) {
                                self.bpe_word(piece, &mut out)?;
                            }
                        }
                        Model::SentencePiece { add_space_prefix, .. } => {
                            let mut s = String::with_capacity(t.len() + 3);
                            if *add_space_prefix && prev_special {
                                s.push('▁');
                            }
                            for c in t.chars() {
                                s.push(if c == ' ' { '▁' } else { c });
                            }
                            self.spm_text(&s, &mut out)?;
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.push(self.eos.ok_or_else(|| invalid!("tokenizer: the model adds EOS but has no eos_token_id"))?);
        }
        Ok(out)
    }

    /// Splits the special tokens out of `text`, the longest token first (llama.cpp's
    /// tokenizer_st_partition).
    fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut frags = vec![Fragment::Text(text)];
        if text.is_empty() {
            return Vec::new();
        }
        for &id in &self.specials {
            let ty = self.types[id as usize];
            if !parse_special && (ty == TYPE_CONTROL || ty == TYPE_UNKNOWN) {
                continue;
            }
            let pat = self.tokens[id as usize].as_str();
            if !frags.iter().any(|f| matches!(f, Fragment::Text(t) if t.contains(pat))) {
                continue;
            }
            let mut out = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                match f {
                    Fragment::Text(mut rest) => {
                        while let Some(p) = rest.find(pat) {
                            if p > 0 {
                                out.push(Fragment::Text(&rest[..p]));
                            }
                            out.push(Fragment::Token(id));
                            rest = &rest[p + pat.len()..];
                        }
                        if !rest.is_empty() {
                            out.push(Fragment::Text(rest));
                        }
                    }
                    tok => out.push(tok),
                }
            }
            frags = out;
        }
        frags
    }

    /// One pre-tokenized piece through byte-level BPE.
    fn bpe_word(&self, piece: &str, out: &mut Vec<u32>) -> Result<()> {
        let Model::BytePair { merges, ignore_merges, byte_char, .. } = &self.model else { unreachable!() };
        let mapped: String = piece.bytes().map(|b| byte_char[b as usize]).collect();
        if *ignore_merges {
            if let Some(&id) = self.ids.get(&mapped) {
                out.push(id);
                return Ok(());
            }
        }
        // One symbol per mapped character; `None` = a character with no token (it cannot merge).
        let mut syms: Vec<Symbol> = Vec::with_capacity(mapped.len());
        let mut buf = [0u8; 4];
        for (i, c) in mapped.chars().enumerate() {
            syms.push(Symbol {
                id: self.ids.get(c.encode_utf8(&mut buf) as &str).copied(),
                prev: i as isize - 1,
                next: i as isize + 1,
                alive: true,
            });
        }
        let n = syms.len() as isize;
        let mut heap = BinaryHeap::new();
        let rank_of = |syms: &[Symbol], l: usize| -> Option<(u32, u32)> {
            let r = syms[l].next;
            if r >= n {
                return None;
            }
            merges.get(&(syms[l].id?, syms[r as usize].id?)).copied()
        };
        for i in 0..syms.len() {
            if let Some((rank, merged)) = rank_of(&syms, i) {
                heap.push(Candidate { rank, left: i, merged });
            }
        }
        while let Some(c) = heap.pop() {
            let l = c.left;
            if !syms[l].alive {
                continue;
            }
            // Still the same pair? (either side may have merged since.)
            match rank_of(&syms, l) {
                Some((rank, merged)) if rank == c.rank && merged == c.merged => {}
                _ => continue,
            }
            let r = syms[l].next as usize;
            syms[l].id = Some(c.merged);
            syms[l].next = syms[r].next;
            syms[r].alive = false;
            if syms[r].next < n {
                let rn = syms[r].next as usize;
                syms[rn].prev = l as isize;
            }
            if syms[l].prev >= 0 {
                let p = syms[l].prev as usize;
                if let Some((rank, merged)) = rank_of(&syms, p) {
                    heap.push(Candidate { rank, left: p, merged });
                }
            }
            if let Some((rank, merged)) = rank_of(&syms, l) {
                heap.push(Candidate { rank, left: l, merged });
            }
        }
        let mut i = 0isize;
        let chars: Vec<char> = mapped.chars().collect();
        while i < n {
            let s = &syms[i as usize];
            match s.id {
                Some(id) => out.push(id),
                None => {
                    let c = chars[i as usize];
                    let id = self.unk.ok_or_else(|| {
                        invalid!("tokenizer: the character {c:?} of {piece:?} has no token and the model has no unknown token")
                    })?;
                    out.push(id);
                }
            }
            i = s.next;
        }
        Ok(())
    }

    /// SentencePiece BPE over one escaped fragment (llm_tokenizer_spm_session::tokenize).
    fn spm_text(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let Model::SentencePiece { scores, byte_ids, .. } = &self.model else { unreachable!() };
        if text.is_empty() {
            return Ok(());
        }
        // Symbols are byte ranges of `text`.
        let mut syms: Vec<SpmSymbol> = Vec::new();
        for (i, (off, c)) in text.char_indices().enumerate() {
            syms.push(SpmSymbol { start: off, len: c.len_utf8(), prev: i as isize - 1, next: i as isize + 1 });
        }
        let n = syms.len() as isize;
        let mut heap = BinaryHeap::new();
        let try_bigram = |syms: &[SpmSymbol], heap: &mut BinaryHeap<SpmCandidate>, l: isize| {
            if l < 0 || syms[l as usize].next >= n {
                return;
            }
            let (a, b) = (&syms[l as usize], &syms[syms[l as usize].next as usize]);
            let s = &text[a.start..b.start + b.len];
            if let Some(&id) = self.ids.get(s) {
                heap.push(SpmCandidate { score: scores[id as usize], left: l as usize, size: s.len() });
            }
        };
        for i in 0..n {
            try_bigram(&syms, &mut heap, i);
        }
        while let Some(c) = heap.pop() {
            let l = c.left;
            let r = syms[l].next;
            if syms[l].len == 0 || r >= n {
                continue;
            }
            let r = r as usize;
            if syms[r].len == 0 || syms[l].len + syms[r].len != c.size {
                continue;
            }
            syms[l].len += syms[r].len;
            syms[r].len = 0;
            syms[l].next = syms[r].next;
            if syms[r].next < n {
                let rn = syms[r].next as usize;
                syms[rn].prev = l as isize;
            }
            try_bigram(&syms, &mut heap, syms[l].prev);
            try_bigram(&syms, &mut heap, l as isize);
        }
        let mut i = 0isize;
        while i < n {
            let s = &syms[i as usize];
            let piece = &text[s.start..s.start + s.len];
            if let Some(&id) = self.ids.get(piece) {
                out.push(id);
            } else {
                // Merged symbols are always tokens; a lone character without one falls back to bytes.
                for b in piece.bytes() {
                    match byte_ids[b as usize].or(self.unk) {
                        Some(id) => out.push(id),
                        None => {
                            return Err(invalid!(
                                "tokenizer: {piece:?} has no token, no <0x{b:02X}> byte token and no unknown token"
                            ))
                        }
                    }
                }
            }
            i = s.next;
        }
        Ok(())
    }

    /// Ids → text (lossy UTF-8). `skip_special`: leave out control tokens. SentencePiece: the
    /// space prefix added at encoding is removed from the first token.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if skip_special && self.is_control(id) {
                continue;
            }
            bytes.extend(self.token_bytes(id));
        }
        if self.strips_leading_space() && bytes.first() == Some(&b' ') {
            bytes.remove(0);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn strips_leading_space(&self) -> bool {
        matches!(self.model, Model::SentencePiece { add_space_prefix: true, .. })
    }

    /// The raw bytes of one token: byte-level characters mapped back (BPE), `▁` → space and
    /// `<0xNN>` → the byte (SentencePiece); control, unknown and user-defined tokens as written.
    /// Empty for an id out of range.
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.tokens.get(id as usize) else { return Vec::new() };
        let ty = self.types[id as usize];
        if matches!(ty, TYPE_CONTROL | TYPE_UNKNOWN | TYPE_USER_DEFINED) {
            return text.as_bytes().to_vec();
        }
        match &self.model {
            Model::BytePair { char_byte, .. } => {
                let mut out = Vec::with_capacity(text.len());
                let mut buf = [0u8; 4];
                for c in text.chars() {
                    match char_byte.get(&c) {
                        Some(&b) => out.push(b),
                        // Not a byte-level character: keep it as UTF-8 (llama.cpp would throw).
                        None => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
                    }
                }
                out
            }
            Model::SentencePiece { .. } => {
                if ty == TYPE_BYTE {
                    if let Some(b) = parse_byte_token(text) {
                        return vec![b];
                    }
                }
                text.replace('▁', " ").into_bytes()
            }
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }
    pub fn is_control(&self, id: u32) -> bool {
        self.types.get(id as usize) == Some(&TYPE_CONTROL)
    }
    /// End-of-generation ids (sorted): eos, eot, eom and the usual end-of-turn control tokens.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }
    /// The vocabulary string of `id`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }
    /// The id of a vocabulary string.
    pub fn token_id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }
    /// The pre-tokenizer family in use ("gpt-2", "smollm", "llama3", "qwen2", "default"), or
    /// None for SentencePiece.
    pub fn pre_name(&self) -> Option<&str> {
        match &self.model {
            Model::BytePair { pre, .. } => Some(pre.name),
            Model::SentencePiece { .. } => None,
        }
    }
    /// Whether the token type is one llama.cpp never produces from text (unused/undefined).
    pub fn is_unused(&self, id: u32) -> bool {
        matches!(self.types.get(id as usize), Some(&TYPE_UNUSED) | Some(&TYPE_UNDEFINED))
    }
}

fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

struct Symbol {
    id: Option<u32>,
    prev: isize,
    next: isize,
    alive: bool,
}

/// A BPE merge candidate; the heap pops the lowest rank, then the leftmost.
#[derive(PartialEq, Eq)]
struct Candidate {
    rank: u32,
    left: usize,
    merged: u32,
}
impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.rank.cmp(&self.rank).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

struct SpmSymbol {
    start: usize,
    len: usize,
    prev: isize,
    next: isize,
}

/// A SentencePiece bigram; the heap pops the highest score, then the leftmost.
struct SpmCandidate {
    score: f32,
    left: usize,
    size: usize,
}
impl PartialEq for SpmCandidate {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for SpmCandidate {}
impl Ord for SpmCandidate {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for SpmCandidate {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// Incremental decoding for streaming: push ids, get back only complete UTF-8 text (bytes of a
/// character split across tokens wait for the rest; bytes that can never form a character come
/// out as U+FFFD).
#[derive(Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    skip_special: bool,
    started: bool,
}

impl StreamDecoder {
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }
    /// A decoder that leaves out control tokens, like `decode(ids, true)`.
    pub fn skipping_special() -> StreamDecoder {
        StreamDecoder { skip_special: true, ..StreamDecoder::default() }
    }

    /// Adds one token; returns the text that is now complete (maybe empty).
    pub fn push(&mut self, tok: &LlmTokenizer, id: u32) -> String {
        if self.skip_special && tok.is_control(id) {
            return String::new();
        }
        let bytes = tok.token_bytes(id);
        let mut bytes = &bytes[..];
        if !self.started && !bytes.is_empty() {
            self.started = true;
            if tok.strips_leading_space() && bytes[0] == b' ' {
                bytes = &bytes[1..];
            }
        }
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..good]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..good);
                            break;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
        out
    }

    /// Whatever is left (an incomplete character comes out as U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}
