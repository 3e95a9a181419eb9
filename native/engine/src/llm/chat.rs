//! Chat templates: a conversation → the prompt text a model was trained on.
//!
//! A GGUF's `tokenizer.chat_template` is a Hugging Face Jinja template; it is rendered with
//! minijinja set up the way transformers' `apply_chat_template` sets up Jinja: `trim_blocks` and
//! `lstrip_blocks`, loop controls, `raise_exception(msg)`, `strftime_now(fmt)` (UTC here),
//! a Python-style `|tojson` (`json.dumps(..., ensure_ascii=False)`: ", " and ": " separators),
//! the Python string and dict methods templates call (`strip`, `split`, `startswith`, `items`,
//! `get`, ...), and the variables `messages`, `add_generation_prompt`, `bos_token`, `eos_token`,
//! `tools` / `documents` (none).
//!
//! The rendered text holds every special token the template writes (BOS included when it writes
//! `{{ bos_token }}`): encode it with `add_special = false, parse_special = true`.

use crate::error::{invalid, Result};
use crate::llm::gguf::Gguf;
use crate::llm::tokenizer::LlmTokenizer;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// One message of a conversation.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// A chat template (checked to compile when made, compiled again per render).
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    name: String,
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

/// llama.cpp's "chatml" (`<|im_start|>role\ncontent<|im_end|>\n`).
const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/// Llama 3 instruct (as its Hugging Face template, BOS written by the template).
const LLAMA3: &str = "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

impl ChatTemplate {
    /// The GGUF's `tokenizer.chat_template`, or None when it has none. A template that does not
    /// compile is an error.
    pub fn from_gguf(g: &Gguf, tok: &LlmTokenizer) -> Result<Option<ChatTemplate>> {
        match g.str("tokenizer.chat_template")? {
            None => Ok(None),
            Some(src) => Ok(Some(ChatTemplate::new("gguf", src, tok)?)),
        }
    }

    /// A built-in template: "chatml" or "llama3".
    pub fn builtin(name: &str, tok: &LlmTokenizer) -> Result<ChatTemplate> {
        let src = match name {
            "chatml" => CHATML,
            "llama3" => LLAMA3,
            other => return Err(invalid!("chat template: no built-in template {other:?} (known: chatml, llama3)")),
        };
        ChatTemplate::new(name, src, tok)
    }

    /// A template from Jinja source (named `name`).
    pub fn from_source(name: &str, source: &str, tok: &LlmTokenizer) -> Result<ChatTemplate> {
        ChatTemplate::new(name, source, tok)
    }

    fn new(name: &str, source: &str, tok: &LlmTokenizer) -> Result<ChatTemplate> {
        let piece = |id: Option<u32>| id.and_then(|i| tok.piece(i)).map(str::to_owned);
        let t = ChatTemplate {
            name: name.to_owned(),
            source: source.to_owned(),
            bos_token: piece(tok.bos()),
            eos_token: piece(tok.eos()),
        };
        let env = environment();
        env.template_from_str(&t.source).map_err(|e| invalid!("chat template {name:?} does not compile: {e:#}"))?;
        Ok(t)
    }

    /// Renders a conversation; `add_generation_prompt` opens the assistant's turn.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let env = environment();
        let tmpl = env
            .template_from_str(&self.source)
            .map_err(|e| invalid!("chat template {:?} does not compile: {e:#}", self.name))?;
        let ctx = minijinja::context! {
            messages => Value::from_serialize(messages),
            add_generation_prompt => add_generation_prompt,
            // Absent tokens are undefined (render empty), as they are missing from HF's special_tokens_map.
            bos_token => self.bos_token.clone().map(Value::from).unwrap_or(Value::UNDEFINED),
            eos_token => self.eos_token.clone().map(Value::from).unwrap_or(Value::UNDEFINED),
            tools => Value::from(()),
            documents => Value::from(()),
        };
        tmpl.render(ctx).map_err(|e| invalid!("chat template {:?} failed: {e:#}", self.name))
    }

    /// "gguf" for the file's own template, else the built-in's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// The environment transformers renders chat templates in, as far as templates can tell.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.add_function("raise_exception", |msg: String| -> std::result::Result<Value, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_function("strftime_now", |fmt: String| strftime_utc(&fmt, now_unix()));
    env.add_filter("tojson", |v: Value, indent: Option<usize>, kw: Kwargs| -> std::result::Result<String, Error> {
        let indent = match indent {
            Some(i) => Some(i),
            None => kw.get::<Option<usize>>("indent")?,
        };
        // sort_keys / separators are accepted for compatibility; keys keep their order.
        let _: Option<bool> = kw.get("sort_keys")?;
        let _: Option<Value> = kw.get("separators")?;
        kw.assert_all_used()?;
        let mut out = String::new();
        py_json(&v, indent, 0, &mut out)?;
        Ok(out)
    });
    env.set_unknown_method_callback(py_method);
    env
}

fn now_unix() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Python's `json.dumps(v, ensure_ascii=False, indent=indent)`.
fn py_json(v: &Value, indent: Option<usize>, depth: usize, out: &mut String) -> std::result::Result<(), Error> {
    let newline = |out: &mut String, d: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * d));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if let Some(i) = v.as_i64() {
                out.push_str(&i.to_string());
            } else {
                let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else if f == f.trunc() && f.abs() < 1e16 {
                    out.push_str(&format!("{f:.1}"));
                } else {
                    out.push_str(&format!("{f}"));
                }
            }
        }
        ValueKind::String => py_json_str(v.as_str().unwrap_or(""), out),
        ValueKind::Map => {
            let keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                match k.as_str() {
                    Some(s) => py_json_str(s, out),
                    None => py_json_str(&k.to_string(), out),
                }
                out.push_str(": ");
                py_json(&v.get_item(k)?, indent, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                py_json(x, indent, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        _ => py_json_str(&v.to_string(), out),
    }
    Ok(())
}

fn py_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn arg_str<'a>(args: &'a [Value], i: usize) -> Option<&'a str> {
    args.get(i).and_then(|v| v.as_str())
}

/// The Python methods HF templates call on strings and dicts.
fn py_method(_state: &State, value: &Value, method: &str, args: &[Value]) -> std::result::Result<Value, Error> {
    let unknown = || Error::new(ErrorKind::UnknownMethod, format!("{} has no method {method}", value.kind()));
    if let Some(s) = value.as_str() {
        let chars = arg_str(args, 0);
        let strip_set = |c: char| match chars {
            Some(set) => set.contains(c),
            None => c.is_whitespace(),
        };
        let prefixes = |i: usize| -> Vec<String> {
            match args.get(i) {
                Some(v) if v.kind() == ValueKind::Seq => {
                    v.try_iter().map(|it| it.map(|x| x.to_string()).collect()).unwrap_or_default()
                }
                Some(v) => vec![v.as_str().unwrap_or_default().to_owned()],
                None => vec![],
            }
        };
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(strip_set)),
            "lstrip" => Value::from(s.trim_start_matches(strip_set)),
            "rstrip" => Value::from(s.trim_end_matches(strip_set)),
            "startswith" => Value::from(prefixes(0).iter().any(|p| s.starts_with(p.as_str()))),
            "endswith" => Value::from(prefixes(0).iter().any(|p| s.ends_with(p.as_str()))),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "capitalize" => {
                let mut c = s.chars();
                Value::from(match c.next() {
                    Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase(),
                    None => String::new(),
                })
            }
            "title" => {
                let mut out = String::with_capacity(s.len());
                let mut prev_letter = false;
                for c in s.chars() {
                    if prev_letter {
                        out.extend(c.to_lowercase());
                    } else {
                        out.extend(c.to_uppercase());
                    }
                    prev_letter = c.is_alphabetic();
                }
                Value::from(out)
            }
            "replace" => {
                let (Some(old), Some(new)) = (arg_str(args, 0), arg_str(args, 1)) else { return Err(unknown()) };
                Value::from(s.replace(old, new))
            }
            "split" | "rsplit" => {
                let max = args.get(1).and_then(|v| v.as_i64()).filter(|&m| m >= 0);
                let parts: Vec<Value> = match (chars, max) {
                    (None, _) => s.split_whitespace().map(Value::from).collect(),
                    (Some(sep), None) => s.split(sep).map(Value::from).collect(),
                    (Some(sep), Some(m)) if method == "split" => s.splitn(m as usize + 1, sep).map(Value::from).collect(),
                    (Some(sep), Some(m)) => {
                        let mut v: Vec<Value> = s.rsplitn(m as usize + 1, sep).map(Value::from).collect();
                        v.reverse();
                        v
                    }
                };
                Value::from(parts)
            }
            "join" => {
                let items = args.first().ok_or_else(unknown)?.try_iter()?;
                Value::from(items.map(|x| x.to_string()).collect::<Vec<_>>().join(s))
            }
            "find" => Value::from(chars.and_then(|p| s.find(p)).map(|b| s[..b].chars().count() as i64).unwrap_or(-1)),
            "count" => Value::from(chars.map(|p| if p.is_empty() { s.chars().count() + 1 } else { s.matches(p).count() }).unwrap_or(0)),
            "isspace" => Value::from(!s.is_empty() && s.chars().all(char::is_whitespace)),
            "isdigit" => Value::from(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
            _ => return Err(unknown()),
        });
    }
    if value.kind() == ValueKind::Map {
        let keys = || value.try_iter().map(|it| it.collect::<Vec<_>>());
        return Ok(match method {
            "items" => Value::from(
                keys()?
                    .into_iter()
                    .map(|k| {
                        let v = value.get_item(&k).unwrap_or_default();
                        Value::from(vec![k, v])
                    })
                    .collect::<Vec<_>>(),
            ),
            "keys" => Value::from(keys()?),
            "values" => Value::from(keys()?.iter().map(|k| value.get_item(k).unwrap_or_default()).collect::<Vec<_>>()),
            "get" => {
                let v = value.get_item(args.first().ok_or_else(unknown)?)?;
                if v.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    v
                }
            }
            _ => return Err(unknown()),
        });
    }
    Err(unknown())
}

/// `time.strftime(fmt)` for the codes chat templates use (%Y %y %m %d %-d %e %B %b %A %a %H %M %S %j %%), UTC.
fn strftime_utc(fmt: &str, unix: i64) -> std::result::Result<String, Error> {
    const MONTHS: [&str; 12] = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let days = unix.div_euclid(86400);
    let secs = unix.rem_euclid(86400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy_mar = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy_mar + 2) / 153;
    let d = doy_mar - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cum[(m - 1) as usize] + d + if leap && m > 2 { 1 } else { 0 };
    let wday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut code = it.next().unwrap_or('%');
        let no_pad = code == '-';
        if no_pad {
            code = it.next().unwrap_or('%');
        }
        let num = |v: i64, w: usize| if no_pad { v.to_string() } else { format!("{v:0w$}") };
        match code {
            'Y' => out.push_str(&y.to_string()),
            'y' => out.push_str(&num(y.rem_euclid(100), 2)),
            'm' => out.push_str(&num(m, 2)),
            'd' => out.push_str(&num(d, 2)),
            'e' => out.push_str(&format!("{d:2}")),
            'B' => out.push_str(MONTHS[(m - 1) as usize]),
            'b' | 'h' => out.push_str(&MONTHS[(m - 1) as usize][..3]),
            'A' => out.push_str(DAYS[wday]),
            'a' => out.push_str(&DAYS[wday][..3]),
            'H' => out.push_str(&num(secs / 3600, 2)),
            'M' => out.push_str(&num(secs / 60 % 60, 2)),
            'S' => out.push_str(&num(secs % 60, 2)),
            'j' => out.push_str(&num(yday, 3)),
            '%' => out.push('%'),
            other => {
                return Err(Error::new(ErrorKind::InvalidOperation, format!("strftime_now: unsupported code %{other}")))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::strftime_utc;

    #[test]
    fn strftime_dates() {
        // 2024-02-29 13:05:09 UTC, a Thursday.
        let t = 1709211909;
        assert_eq!(strftime_utc("%Y-%m-%d %H:%M:%S %A %a %B %b %j %-d %y", t).unwrap(),
                   "2024-02-29 13:05:09 Thursday Thu February Feb 060 29 24");
        assert_eq!(strftime_utc("%d %b %Y", 0).unwrap(), "01 Jan 1970");
    }
}
