//! The encoder runtime (engine `encoder/`): a checkpoint loaded into a resource
//! (`encoder_load`), texts embedded in one batch (`encoder_embed`), what was loaded
//! (`encoder_info`). Translation only.

use crate::list::List;
use crate::encode_result;
use nx_vulkan_engine::encoder::{Embedding, Encoder, EncoderOptions, Precision};
use nx_vulkan_engine::{self as engine, Context, EngineError};
use rustler::{Binary, Encoder as _, Env, OwnedBinary, ResourceArc, Term};
use std::path::PathBuf;
use std::sync::Arc;

pub struct EncoderRef {
    encoder: Arc<Encoder>,
}

#[rustler::resource_impl]
impl rustler::Resource for EncoderRef {}

/// Loads the checkpoint folder `path` on the process-wide device. `max_tokens` 0 keeps the
/// checkpoint's own limit.
#[rustler::nif(schedule = "DirtyIo")]
fn encoder_load(env: Env<'_>, path: String, precision: String, max_tokens: usize) -> Term<'_> {
    let r = (|| {
        let precision = Precision::parse(&precision)?;
        let options = EncoderOptions { precision, max_tokens: (max_tokens > 0).then_some(max_tokens) };
        let dir = PathBuf::from(path);
        engine::exec::run(move || Encoder::load(Context::global()?, &dir, &options))
    })();
    encode_result(env, r, |env, e| ResourceArc::new(EncoderRef { encoder: Arc::new(e) }).encode(env))
}

/// `{{model, device, precision}, {dimensions, max_tokens, pooling, normalize, weight_bytes}}`.
#[rustler::nif]
fn encoder_info(env: Env<'_>, encoder: ResourceArc<EncoderRef>) -> Term<'_> {
    let i = encoder.encoder.info();
    // (rustler encodes tuples of up to 7 elements)
    let info = ((i.model.as_str(), i.device.as_str(), i.precision.name()), (i.dimensions, i.max_tokens, i.config.pooling.name(), i.config.normalize, i.weight_bytes));
    encode_result(env, Ok(()), |env, ()| info.encode(env))
}

/// Embeds `texts` (binaries, UTF-8) as one batch: `{:ok, [{vector_f32_binary, tokens,
/// truncated}]}` in input order.
#[rustler::nif(schedule = "DirtyCpu")]
fn encoder_embed<'a>(env: Env<'a>, encoder: ResourceArc<EncoderRef>, texts: List<Binary<'a>>) -> Term<'a> {
    let r = (|| {
        let texts = texts
            .iter()
            .enumerate()
            .map(|(i, b)| {
                std::str::from_utf8(b.as_slice())
                    .map(str::to_owned)
                    .map_err(|e| EngineError::InvalidArgument(format!("input {i} is not valid UTF-8: {e}")))
            })
            .collect::<engine::Result<Vec<String>>>()?;
        let enc = encoder.encoder.clone();
        engine::exec::run(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            enc.embed(&refs)
        })
    })();
    encode_result(env, r, embeddings_term)
}

/// The token ids the model sees for each text: `{:ok, [{ids_u32_binary, truncated}]}`.
#[rustler::nif(schedule = "DirtyCpu")]
fn encoder_tokenize<'a>(env: Env<'a>, encoder: ResourceArc<EncoderRef>, texts: List<Binary<'a>>) -> Term<'a> {
    let r = texts
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let text = std::str::from_utf8(b.as_slice()).map_err(|e| EngineError::InvalidArgument(format!("input {i} is not valid UTF-8: {e}")))?;
            encoder.encoder.tokenize(text)
        })
        .collect::<engine::Result<Vec<_>>>();
    encode_result(env, r, |env, all| {
        all.into_iter()
            .map(|t| {
                (le_binary(env, &t.ids), t.truncated)
            })
            .collect::<Vec<_>>()
            .encode(env)
    })
}

/// Embeds already tokenized inputs (u32 little-endian id binaries, token type 0), as
/// `encoder_embed` does.
#[rustler::nif(schedule = "DirtyCpu")]
fn encoder_embed_tokens<'a>(env: Env<'a>, encoder: ResourceArc<EncoderRef>, ids: List<Binary<'a>>) -> Term<'a> {
    let r = (|| {
        let tokens = ids
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if b.len() % 4 != 0 {
                    return Err(EngineError::InvalidArgument(format!("input {i}: token ids must be u32 (a binary of 4-byte ids), got {} bytes", b.len())));
                }
                let ids: Vec<u32> = b.as_slice().chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                let type_ids = vec![0; ids.len()];
                Ok(nx_vulkan_engine::encoder::tokenize::Tokens { ids, type_ids, truncated: false })
            })
            .collect::<engine::Result<Vec<_>>>()?;
        let enc = encoder.encoder.clone();
        engine::exec::run(move || enc.embed_tokens(&tokens))
    })();
    encode_result(env, r, embeddings_term)
}

/// `[{vector_f32_binary, tokens, truncated}]`.
fn embeddings_term(env: Env<'_>, embeddings: Vec<Embedding>) -> Term<'_> {
    embeddings.into_iter().map(|e| (le_binary(env, &e.vector), e.tokens, e.truncated)).collect::<Vec<_>>().encode(env)
}

/// Little-endian bytes of 4-byte values as a binary.
fn le_binary<'a, T: Copy + ToLeBytes4>(env: Env<'a>, values: &[T]) -> Binary<'a> {
    let mut bin = OwnedBinary::new(values.len() * 4);
    for (chunk, v) in bin.as_mut_slice().chunks_exact_mut(4).zip(values) {
        chunk.copy_from_slice(&v.le4());
    }
    bin.release(env)
}

trait ToLeBytes4 {
    fn le4(self) -> [u8; 4];
}
impl ToLeBytes4 for f32 {
    fn le4(self) -> [u8; 4] {
        self.to_le_bytes()
    }
}
impl ToLeBytes4 for u32 {
    fn le4(self) -> [u8; 4] {
        self.to_le_bytes()
    }
}
