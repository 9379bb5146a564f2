//! The safetensors stream over any bytes: `Ok` or a specific `Err`, never a panic or a hang.
//! The first byte sets the chunk size, so cuts fall anywhere.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onetoken::Qwen2Config;
use onetoken::reference::F32Tensors;
use onetoken::weights::{CheckedSink, SafetensorsStream};

const CONFIG: &[u8] = include_bytes!("../../tests/fixtures/tiny-qwen2/config.json");

fuzz_target!(|data: &[u8]| {
    let Some((&cut, file)) = data.split_first() else { return };
    let config = Qwen2Config::from_json(CONFIG).expect("the fixture's config");
    let mut sink = CheckedSink::new(&config, F32Tensors::default());
    let mut stream = SafetensorsStream::new("model.safetensors", Some(file.len() as u64));
    let chunk = 1 + usize::from(cut) * 311;
    let _ = file
        .chunks(chunk)
        .try_for_each(|piece| stream.push(piece, &mut sink))
        .and_then(|()| stream.finish())
        .and_then(|()| sink.finish().map(drop));
});
