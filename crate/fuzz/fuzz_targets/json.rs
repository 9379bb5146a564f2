//! config.json, the shard index and the judgment request over any bytes (the first byte picks
//! which): `Ok` or a specific `Err`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onetoken::Qwen2Config;
use onetoken::judge::JudgeRequest;
use onetoken::weights::shard_names;

fuzz_target!(|data: &[u8]| {
    let Some((&which, json)) = data.split_first() else { return };
    match which % 3 {
        0 => {
            if let Ok(c) = Qwen2Config::from_json(json) {
                // A config that parses is one the engine can size from.
                assert!(c.hidden_size.is_multiple_of(c.num_attention_heads));
                let _ = c.parameter_count();
            }
        }
        1 => {
            if let Ok(names) = shard_names(Some(json)) {
                assert!(!names.is_empty());
            }
        }
        _ => {
            let _ = serde_json::from_slice::<JudgeRequest>(json);
        }
    }
});
