//! tokenizer_config.json (with its chat template) over any bytes, rendered for a judgment and
//! tokenized: `Ok` or a specific `Err`, never a panic; templates run on fuel, so no hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onetoken::tokenizer::Tokenizer;

const TOKENIZER: &[u8] = include_bytes!("../../tests/fixtures/tiny-qwen2/tokenizer.json");

fuzz_target!(|data: &[u8]| {
    let Ok(tokenizer) = Tokenizer::from_bytes(TOKENIZER, Some(data)) else { return };
    if let Ok(prompt) = tokenizer.chat_prompt(Some("system"), "Which color?", "{\"choice\": \"") {
        let _ = tokenizer.encode(&prompt);
    }
});
