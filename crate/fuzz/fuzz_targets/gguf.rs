//! The GGUF stream over any bytes: the header, the config and tokenizer from its metadata, the
//! tensors checked against them. `Ok` or a specific `Err`, never a panic or a hang. The first
//! byte sets the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onetoken::Qwen2Config;
use onetoken::gguf::{GgufHeader, read_pieces, tokenizer};
use onetoken::reference::F32Tensors;

fn load(file: &[u8], chunk: usize) -> onetoken::Result<()> {
    let make = |_: &GgufHeader, _: &Qwen2Config| Ok(F32Tensors::default());
    let (header, _) = read_pieces("model.gguf", Some(file.len() as u64), file.chunks(chunk).map(Ok), Some(make))?;
    tokenizer(&header).map(drop)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, file)) = data.split_first() else { return };
    let _ = load(file, 1 + usize::from(cut) * 311);
});
