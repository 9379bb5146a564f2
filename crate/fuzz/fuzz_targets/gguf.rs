//! The GGUF stream over any bytes: the header, the config and tokenizer from its metadata, the
//! tensors checked against them. `Ok` or a specific `Err`, never a panic or a hang. The first
//! byte sets the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onetoken::gguf::{GgufStream, tokenizer};
use onetoken::reference::F32Tensors;
use onetoken::weights::CheckedSink;

fn load(file: &[u8], chunk: usize) -> onetoken::Result<()> {
    let mut stream = GgufStream::new("model.gguf", Some(file.len() as u64));
    let mut pieces = file.chunks(chunk);
    for piece in pieces.by_ref() {
        if stream.push_header(piece)? {
            break;
        }
    }
    let Some(header) = stream.header() else { return stream.finish() };
    let config = header.config()?;
    tokenizer(header)?;
    let mut sink = CheckedSink::new(&config, F32Tensors::default());
    stream.push(&[], &mut sink)?;
    for piece in pieces {
        stream.push(piece, &mut sink)?;
    }
    stream.finish()?;
    sink.finish().map(drop)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, file)) = data.split_first() else { return };
    let _ = load(file, 1 + usize::from(cut) * 311);
});
