//! Text <-> token ids with the model's own `tokenizer.json`, and chat prompts rendered from the
//! model's own `chat_template` by a real Jinja engine, with the settings HF transformers uses, so
//! any Qwen-family template renders as `apply_chat_template` does.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A tokenizer plus its chat template.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    chat_template: Option<String>,
    /// Special-token strings the template may use (`bos_token`, `eos_token`, ...).
    special: Vec<(&'static str, String)>,
    /// Where the two came from, for messages.
    source: TokenizerSource,
}

/// What errors call a tokenizer's two parts: the files of a model folder, or the GGUF
/// metadata they were built from.
#[derive(Debug, Clone, Copy)]
pub struct TokenizerSource {
    pub tokenizer: &'static str,
    pub chat_template: &'static str,
}

impl TokenizerSource {
    pub const FOLDER: Self = Self { tokenizer: "tokenizer.json", chat_template: "tokenizer_config.json" };
    pub const GGUF: Self =
        Self { tokenizer: "the GGUF file's tokenizer.ggml.* metadata", chat_template: "the GGUF file's metadata" };
}

/// Most template instructions one rendering may run.
const TEMPLATE_FUEL: u64 = 1_000_000;

/// The most text one rendering may write: four times its messages' text and 1 MiB more. Qwen's
/// template writes each message once; a broken template that writes without end fails with a
/// clear error instead of exhausting memory (fuel bounds its steps, not their output).
fn template_output_limit(messages: &[Message]) -> usize {
    let text: usize = messages.iter().map(|m| m.role.len() + m.content.len()).sum();
    text.saturating_mul(4).saturating_add(1 << 20)
}

/// The widest `tojson` indent a template may ask for (HF's templates use 2 or 4).
const MAX_TOJSON_INDENT: usize = 64;

/// Marks where a continued assistant message ends in a rendered chat (HF does the same): text
/// from the marker on is cut off. A private-use character cannot appear in a real template.
const CONTINUE_MARK: &str = "\u{F8FF}onetoken-continue\u{F8FF}";

impl Tokenizer {
    /// Reads `tokenizer.json` and, when given, `tokenizer_config.json` (for the chat template).
    pub fn from_bytes(tokenizer_json: &[u8], tokenizer_config_json: Option<&[u8]>) -> Result<Self> {
        Self::from_source(tokenizer_json, tokenizer_config_json, TokenizerSource::FOLDER)
    }

    /// As [`Tokenizer::from_bytes`], errors naming `source`'s parts.
    pub fn from_source(
        tokenizer_json: &[u8],
        tokenizer_config_json: Option<&[u8]>,
        source: TokenizerSource,
    ) -> Result<Self> {
        let mut inner = tokenizers::Tokenizer::from_bytes(tokenizer_json)
            .map_err(|e| Error::Tokenizer(format!("{} is not a Hugging Face tokenizer ({e})", source.tokenizer)))?;
        // A file may ask to truncate or pad what it encodes (for training batches): a prompt
        // cut short or padded would be judged silently wrong, so every text is encoded whole.
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| {
            Error::Tokenizer(format!("{}: its truncation cannot be turned off ({e})", source.tokenizer))
        })?;
        let (mut chat_template, mut special) = (None, Vec::new());
        if let Some(bytes) = tokenizer_config_json {
            let cfg: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|e| Error::Tokenizer(format!("{} is not valid JSON: {e}", source.chat_template)))?;
            chat_template = match &cfg["chat_template"] {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Null => None,
                // A list of named templates: take the one named "default".
                serde_json::Value::Array(list) => {
                    list.iter().find(|t| t["name"] == "default").and_then(|t| t["template"].as_str().map(String::from))
                }
                _ => {
                    return Err(Error::Tokenizer("chat_template has an unexpected form".into()));
                }
            };
            for key in ["bos_token", "eos_token", "pad_token", "unk_token"] {
                let text = match &cfg[key] {
                    serde_json::Value::String(s) => Some(s.clone()),
                    v => v["content"].as_str().map(String::from),
                };
                if let Some(text) = text {
                    special.push((key, text));
                }
            }
        }
        Ok(Self { inner, chat_template, special, source })
    }

    /// Reads `tokenizer.json` and `tokenizer_config.json` from a model folder.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(dir: &std::path::Path) -> Result<Self> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| Error::Io { path: path.display().to_string(), source })
        };
        // Optional (a folder may have no chat template), but present and unreadable is an error.
        let config = match read("tokenizer_config.json") {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => None,
            other => Some(other?),
        };
        Self::from_bytes(&read("tokenizer.json")?, config.as_deref())
    }

    /// Token ids of `text`, special tokens written in the text included, no BOS added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// The id of a token given as its exact text (e.g. `<|im_end|>`).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The text that ends a reply (`eos_token` of `tokenizer_config.json`: `<|im_end|>` for
    /// Qwen2.5 Instruct), if the config names one.
    pub fn eos_token(&self) -> Option<&str> {
        self.special.iter().find(|(key, _)| *key == "eos_token").map(|(_, text)| text.as_str())
    }

    /// Whether `id` is an added special token (`<|endoftext|>`, `<|im_end|>`, ...): text
    /// never continues past one.
    pub fn is_special_id(&self, id: u32) -> bool {
        self.inner.get_added_tokens_decoder().get(&id).is_some_and(|t| t.special)
    }

    /// Whether `text` is exactly one added special token (such as `<|im_end|>`).
    pub fn is_special(&self, text: &str) -> bool {
        self.inner.get_added_tokens_decoder().values().any(|t| t.special && t.content == text)
    }

    /// Number of ids the tokenizer knows, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Renders `messages` with the chat template, as HF's `apply_chat_template(tokenize=False)`.
    /// With `continue_final_message`, the last message (an assistant reply prefix) is left open
    /// so the model continues it; it excludes `add_generation_prompt`, as in HF.
    pub fn render_chat(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        continue_final_message: bool,
    ) -> Result<String> {
        let template = self
            .chat_template
            .as_deref()
            .ok_or_else(|| Error::Template(format!("{} has no chat_template", self.source.chat_template)))?;
        if continue_final_message && add_generation_prompt {
            return Err(Error::Template("continue_final_message and add_generation_prompt cannot both be set".into()));
        }
        let mut messages = messages.to_vec();
        if continue_final_message {
            let last = messages.last_mut().ok_or_else(|| Error::Template("no message to continue".into()))?;
            last.content.push_str(CONTINUE_MARK);
        }
        let mut env = Environment::new();
        // A template comes with the model files: one that loops or recurses without end runs
        // out of fuel (a clear error) instead of hanging the page. Qwen's needs a few thousand.
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", python_tojson);
        env.add_function("raise_exception", |msg: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template("chat", template).map_err(|e| Error::Template(e.to_string()))?;
        let mut ctx = serde_json::Map::new();
        ctx.insert("messages".into(), serde_json::to_value(&messages).expect("plain strings"));
        ctx.insert("add_generation_prompt".into(), add_generation_prompt.into());
        for (key, text) in &self.special {
            ctx.insert((*key).into(), text.clone().into());
        }
        let tmpl = env.get_template("chat").map_err(|e| Error::Template(e.to_string()))?;
        let mut out = BoundedText { text: Vec::new(), limit: template_output_limit(&messages), overflowed: false };
        if let Err(e) = tmpl.render_captured_to(Value::from_serialize(&ctx), &mut out) {
            return Err(Error::Template(if out.overflowed {
                format!("the chat template wrote more than {} bytes for this prompt", out.limit)
            } else {
                e.to_string()
            }));
        }
        let mut text = String::from_utf8(out.text).map_err(|e| Error::Template(e.to_string()))?;
        if continue_final_message {
            let at = text.rfind(CONTINUE_MARK).ok_or_else(|| {
                Error::Template("the template dropped the final message, so it cannot be continued".into())
            })?;
            text.truncate(at);
        }
        Ok(text)
    }

    /// The prompt of one judgment: an optional system message, the user message, and the
    /// assistant's reply opened with `response_prefix` (empty: a plain generation prompt).
    pub fn chat_prompt(&self, system: Option<&str>, user: &str, response_prefix: &str) -> Result<String> {
        let mut messages = Vec::new();
        if let Some(system) = system {
            messages.push(Message::new("system", system));
        }
        messages.push(Message::new("user", user));
        if response_prefix.is_empty() {
            return self.render_chat(&messages, true, false);
        }
        messages.push(Message::new("assistant", response_prefix));
        self.render_chat(&messages, false, true)
    }
}

/// A rendering's text, refusing to grow past `limit` bytes.
struct BoundedText {
    text: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl std::io::Write for BoundedText {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.text.len().saturating_add(bytes.len()) > self.limit {
            self.overflowed = true;
            return Err(std::io::Error::other("past the output limit"));
        }
        self.text.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`, as HF's `tojson` filter:
/// `", "` and `": "` separators when not indented, no HTML escaping (unlike minijinja's own).
fn python_tojson(value: Value, kwargs: Kwargs) -> Result<Value, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    if indent.is_some_and(|n| n > MAX_TOJSON_INDENT) {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: an indent of at most {MAX_TOJSON_INDENT} spaces"),
        ));
    }
    let json =
        serde_json::to_value(&value).map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let mut out = String::new();
    write_python_json(&json, indent, 0, &mut out);
    Ok(Value::from_safe_string(out))
}

fn write_python_json(v: &serde_json::Value, indent: Option<usize>, depth: usize, out: &mut String) {
    use serde_json::Value as J;
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * depth));
        }
    };
    let sep = if indent.is_some() { "," } else { ", " };
    match v {
        J::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, depth + 1);
                write_python_json(item, indent, depth + 1, out);
            }
            newline(out, depth);
            out.push(']');
        }
        J::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, depth + 1);
                out.push_str(&serde_json::to_string(key).expect("string"));
                out.push_str(": ");
                write_python_json(item, indent, depth + 1, out);
            }
            newline(out, depth);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}
