//! The JSON-lines encode loop behind `nx-vulkan encode`: texts in, one embedding per line out,
//! in input order.
//!
//! Each input line is a JSON string or an object `{"text": …, "id"?: …}` (`id` is echoed as
//! given, any JSON value); blank lines are skipped. Each output line is
//! `{"id"?, "index", "embedding", "tokens", "truncated", "model", "device", "precision"}` with
//! `index` counting embedded inputs from 0 (the `index` the HTTP API gives the same inputs).
//! A line that is not valid input becomes `{"line": N, "error": "…"}` at its place (N counts
//! lines from 1) and the loop goes on; an embedder failure stops it.

use crate::embedder::{Embedder, ModelInfo};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, Write};

/// What went wrong that stops the loop.
#[derive(Debug)]
pub enum EncodeError {
    Io(std::io::Error),
    /// The embedder failed a batch.
    Embed(String),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::Io(e) => write!(f, "{e}"),
            EncodeError::Embed(e) => write!(f, "embedding failed: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}

impl From<std::io::Error> for EncodeError {
    fn from(e: std::io::Error) -> Self {
        EncodeError::Io(e)
    }
}

/// Counts for the caller's closing message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncodeSummary {
    /// Inputs embedded.
    pub inputs: usize,
    /// Lines answered with an error line.
    pub bad_lines: usize,
    pub truncated: usize,
}

/// One output place, in input order: an input waiting for its batch, or a bad line.
enum Place {
    Input { id: Option<Value>, index: usize },
    Bad { line: usize, error: String },
}

#[derive(Serialize)]
struct OutputLine<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<Value>,
    index: usize,
    embedding: &'a [f32],
    tokens: usize,
    truncated: bool,
    model: &'a str,
    device: &'a str,
    precision: &'a str,
}

/// Reads JSON lines from `input`, embeds them in batches of at most `batch` and writes one
/// line per input line to `output` (flushed after each batch). `progress` is told the bytes
/// read so far after each batch.
pub fn encode_lines(embedder: &mut dyn Embedder, input: impl BufRead, mut output: impl Write, batch: usize, progress: &mut dyn FnMut(u64)) -> Result<EncodeSummary, EncodeError> {
    let batch = batch.max(1);
    let info = embedder.info();
    let mut summary = EncodeSummary::default();
    let mut places = vec![];
    let mut texts = vec![];
    let mut bytes_read = 0u64;
    let mut input = input;
    let mut raw = vec![];
    for line_number in 1.. {
        raw.clear();
        let n = input.read_until(b'\n', &mut raw)?;
        if n == 0 {
            break;
        }
        bytes_read += n as u64;
        match parse_line(&raw) {
            Ok(None) => {}
            Ok(Some((text, id))) => {
                places.push(Place::Input { id, index: summary.inputs + texts.len() });
                texts.push(text);
            }
            Err(error) => places.push(Place::Bad { line: line_number, error }),
        }
        if texts.len() == batch {
            flush(embedder, &info, &mut places, &mut texts, &mut output, &mut summary)?;
            progress(bytes_read);
        }
    }
    flush(embedder, &info, &mut places, &mut texts, &mut output, &mut summary)?;
    progress(bytes_read);
    Ok(summary)
}

/// One input line: `Ok(None)` for a blank line, else its text and id.
fn parse_line(raw: &[u8]) -> Result<Option<(String, Option<Value>)>, String> {
    let line = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?.trim();
    if line.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(line).map_err(|e| format!("invalid JSON: {e}"))? {
        Value::String(text) => Ok(Some((text, None))),
        Value::Object(mut object) => match object.remove("text") {
            Some(Value::String(text)) => Ok(Some((text, object.remove("id")))),
            Some(_) => Err("\"text\" must be a string".into()),
            None => Err("an object needs a \"text\" field".into()),
        },
        _ => Err("expected a JSON string or an object {\"text\": …, \"id\"?: …}".into()),
    }
}

/// Embeds the waiting texts and writes every waiting place in order.
fn flush(embedder: &mut dyn Embedder, info: &ModelInfo, places: &mut Vec<Place>, texts: &mut Vec<String>, output: &mut impl Write, summary: &mut EncodeSummary) -> Result<(), EncodeError> {
    let outputs = if texts.is_empty() { vec![] } else { embedder.embed(texts).map_err(EncodeError::Embed)? };
    if outputs.len() != texts.len() {
        return Err(EncodeError::Embed(format!("the embedder answered {} outputs for {} inputs", outputs.len(), texts.len())));
    }
    let mut outputs = outputs.into_iter();
    for place in places.drain(..) {
        let line = match place {
            Place::Input { id, index } => {
                let out = outputs.next().expect("one output per input");
                summary.inputs += 1;
                summary.truncated += out.truncated as usize;
                serde_json::to_string(&OutputLine {
                    id,
                    index,
                    embedding: &out.vector,
                    tokens: out.tokens,
                    truncated: out.truncated,
                    model: &info.model,
                    device: &info.device,
                    precision: &info.precision,
                })
            }
            Place::Bad { line, error } => {
                summary.bad_lines += 1;
                serde_json::to_string(&serde_json::json!({"line": line, "error": error}))
            }
        }
        .map_err(std::io::Error::other)?;
        writeln!(output, "{line}")?;
    }
    texts.clear();
    output.flush()?;
    Ok(())
}
