//! The browser edge: a thin wasm-bindgen API over the library. Logic stays in plain Rust; here
//! errors become `JsError` once and data crosses as plain arrays, strings and JSON.

use wasm_bindgen::prelude::*;

use crate::tokenizer::Tokenizer;

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

fn js(e: crate::Error) -> JsError {
    JsError::new(&e.to_string())
}

/// A tokenizer with its chat template, made from the bytes of `tokenizer.json` and
/// (optionally) `tokenizer_config.json`.
#[wasm_bindgen]
pub struct WebTokenizer(Tokenizer);

#[wasm_bindgen]
impl WebTokenizer {
    #[wasm_bindgen(constructor)]
    pub fn new(tokenizer_json: &[u8], tokenizer_config_json: Option<Vec<u8>>) -> Result<WebTokenizer, JsError> {
        Tokenizer::from_bytes(tokenizer_json, tokenizer_config_json.as_deref()).map(Self).map_err(js)
    }

    /// Token ids of `text` (a `Uint32Array`), no BOS added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, JsError> {
        self.0.encode(text).map_err(js)
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, JsError> {
        self.0.decode(ids).map_err(js)
    }

    /// The chat prompt of a judgment: system (optional), user, and the reply opened with `prefix`.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(&self, system: Option<String>, user: &str, prefix: &str) -> Result<String, JsError> {
        self.0.chat_prompt(system.as_deref(), user, prefix).map_err(js)
    }
}
