//! The browser edge: a thin wasm-bindgen API over the library, driven from a Web Worker.
//! Logic stays in plain Rust; here errors become JS `Error`s once, each with a `code` property
//! ([`crate::Error::code`]: `device_lost`, `no_adapter`, `input`...) and, where the error has
//! them, `details` ([`crate::Error::details`]), and records cross as JSON
//! strings (the same JSON the CLI prints).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use serde::Serialize;
use serde_wasm_bindgen::Serializer;
use wasm_bindgen::prelude::*;

use crate::bench::{self, BenchOptions};
use crate::config::Qwen2Config;
use crate::gguf::GgufStream;
use crate::gpu::{Gpu, GpuLoader, GpuOptions, GpuWeights, KernelFamily, Tuning};
use crate::judge::{DEFAULT_PREFIX, Engine, JudgeOptions, JudgeRequest, PrefixSharing, Strategy};
use crate::quant::Quant;
use crate::tokenizer::Tokenizer;
use crate::weights::{CheckedSink, SafetensorsStream, shard_names};

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// A JS `Error` with the library error's message and `code`, and `details` where the error has
/// them ([`crate::Error::details`]: the page words those in its own language).
fn js(e: crate::Error) -> JsValue {
    let error = js_error(&e.to_string(), e.code());
    // JSON values always convert (objects become plain objects); setting a property on a fresh
    // Error cannot fail.
    if let Some(Ok(details)) = e.details().map(|d| d.serialize(&Serializer::json_compatible())) {
        let _ = js_sys::Reflect::set(&error, &JsValue::from_str("details"), &details);
    }
    error
}

/// A JS `Error` with `message` and a `code` property.
fn js_error(message: &str, code: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&error, &JsValue::from_str("code"), &JsValue::from_str(code));
    error.into()
}

/// An error in how the page drives this API (a call out of order, a malformed argument).
fn usage(message: &str) -> JsValue {
    js_error(message, "usage")
}

/// A progress hook that hands each [`crate::judge::Progress`] to `f` as JSON.
fn reporter(f: js_sys::Function) -> crate::judge::ProgressHook {
    Box::new(move |p| {
        let _ = f.call1(&JsValue::NULL, &JsValue::from_str(&json(p)));
    })
}

/// `q8_0`, `q5_0`, `q4_0`, or none (an empty string counts as none).
fn parse_quant(quant: Option<String>) -> Result<Option<Quant>, JsValue> {
    quant.filter(|q| !q.is_empty()).map(|q| q.parse()).transpose().map_err(js)
}

/// The response prefix strategy B prefills when a request names none.
#[wasm_bindgen(js_name = defaultPrefix)]
pub fn default_prefix() -> String {
    DEFAULT_PREFIX.to_string()
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serialises")
}

/// The GPU device (WebGPU), opened with the adapter's own limits.
#[wasm_bindgen]
pub struct WebGpu(Rc<Gpu>);

#[wasm_bindgen]
impl WebGpu {
    /// Opens the device; fails with a message naming what is missing. `direct`: use the
    /// barrier-free kernel family, as for a CPU implementation such as SwiftShader (the browser
    /// tells JS, not wgpu, what the adapter is), or as the page's `?kernels=direct` asks.
    /// `tune`: where the tiled kernels change path, as the CLI's `--tune` takes it (the page's
    /// `?tune=`; empty: the defaults).
    pub async fn open(direct: bool, tune: String) -> Result<WebGpu, JsValue> {
        let kernels = Some(if direct { KernelFamily::Direct } else { KernelFamily::Tiled });
        let tuning: Tuning = tune.parse().map_err(js)?;
        Ok(Self(Rc::new(Gpu::new(GpuOptions { kernels, tuning, ..Default::default() }).await.map_err(js)?)))
    }

    /// `{"name", "backend", "timestamps", "max_binding", "max_buffer"}` as JSON.
    pub fn info(&self) -> String {
        let g = &self.0;
        json(&serde_json::json!({
            "name": g.info().name,
            "backend": format!("{:?}", g.info().backend),
            "timestamps": g.timestamps(),
            "direct_kernels": g.direct_kernels(),
            "tuning": g.tuning(),
            "max_binding": g.max_binding(),
            "max_buffer": g.limits().max_buffer_size,
        }))
    }
}

/// Streams a model's safetensors files to the GPU as they download: call `beginFile`, `push`
/// each chunk as it arrives, `endFile`, for every shard, then `finish`. Nothing is kept in
/// wasm memory but the current chunk.
#[wasm_bindgen]
pub struct WebLoader {
    gpu: Rc<Gpu>,
    config: Qwen2Config,
    sink: Option<CheckedSink<GpuLoader>>,
    stream: Option<SafetensorsStream>,
}

#[wasm_bindgen]
impl WebLoader {
    /// `quant`: `q8_0`, `q5_0` or `q4_0` to quantize the matrices on the way to the GPU.
    #[wasm_bindgen(constructor)]
    pub fn new(gpu: &WebGpu, config_json: &[u8], quant: Option<String>) -> Result<WebLoader, JsValue> {
        let config = Qwen2Config::from_json(config_json).map_err(js)?;
        let sink = CheckedSink::new(&config, GpuLoader::new(gpu.0.clone(), &config, parse_quant(quant)?));
        Ok(Self { gpu: gpu.0.clone(), config, sink: Some(sink), stream: None })
    }

    /// The safetensors files to fetch, given `model.safetensors.index.json` if there is one.
    #[wasm_bindgen(js_name = shardNames)]
    pub fn shard_names(index_json: Option<Vec<u8>>) -> Result<Vec<String>, JsValue> {
        shard_names(index_json.as_deref()).map_err(js)
    }

    /// Bytes of weights the model needs on the GPU (for progress and memory messages).
    #[wasm_bindgen(js_name = weightBytes)]
    pub fn weight_bytes(&self) -> f64 {
        (self.config.parameter_count() * 2) as f64
    }

    /// Starts the next file. The one before must have ended (`endFile`): its tensors were
    /// counted as present when its header arrived, so dropping it part way would leave them
    /// unwritten.
    #[wasm_bindgen(js_name = beginFile)]
    pub fn begin_file(&mut self, name: &str, length: Option<f64>) -> Result<(), JsValue> {
        if self.stream.is_some() {
            return Err(usage("beginFile before the file begun last has ended (endFile)"));
        }
        self.stream = Some(SafetensorsStream::new(name, length.map(|l| l as u64)));
        Ok(())
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        let (Some(stream), Some(sink)) = (self.stream.as_mut(), self.sink.as_mut()) else {
            return Err(usage("push before beginFile"));
        };
        stream.push(chunk, sink).map_err(js)
    }

    #[wasm_bindgen(js_name = endFile)]
    pub fn end_file(&mut self) -> Result<(), JsValue> {
        let stream = self.stream.take().ok_or_else(|| usage("endFile before beginFile"))?;
        stream.finish().map_err(js)
    }

    /// The engine, once every file has been pushed.
    pub fn finish(
        &mut self,
        tokenizer_json: &[u8],
        tokenizer_config_json: Option<Vec<u8>>,
    ) -> Result<WebEngine, JsValue> {
        if self.stream.is_some() {
            return Err(usage("finish before the last file has ended (endFile)"));
        }
        let sink = self.sink.take().ok_or_else(|| usage("finish called twice"))?;
        let weights = sink.finish().map_err(js)?.finish().map_err(js)?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json, tokenizer_config_json.as_deref()).map_err(js)?;
        WebEngine::build(self.gpu.clone(), weights, tokenizer)
    }
}

/// Streams a GGUF file to the GPU as it downloads: `push` each chunk, then `finish`. The
/// header (a few MB: shapes, tokenizer, chat template) is gathered first; after it, nothing is
/// kept in wasm memory but the current chunk.
#[wasm_bindgen]
pub struct WebGgufLoader {
    gpu: Rc<Gpu>,
    quant: Option<Quant>,
    stream: GgufStream,
    /// Both made from the header, before any weight arrives (a bad tokenizer fails early).
    sink: Option<CheckedSink<GpuLoader>>,
    tokenizer: Option<Tokenizer>,
}

#[wasm_bindgen]
impl WebGgufLoader {
    /// `name`: the file's name (for messages); `length`: its size when known; `quant`: must
    /// match the file's own type, or be empty.
    #[wasm_bindgen(constructor)]
    pub fn new(gpu: &WebGpu, name: &str, length: Option<f64>, quant: Option<String>) -> Result<WebGgufLoader, JsValue> {
        Ok(Self {
            gpu: gpu.0.clone(),
            quant: parse_quant(quant)?,
            stream: GgufStream::new(name, length.map(|l| l as u64)),
            sink: None,
            tokenizer: None,
        })
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        match &mut self.sink {
            Some(sink) => self.stream.push(chunk, sink).map_err(js),
            None => {
                if !self.stream.push_header(chunk).map_err(js)? {
                    return Ok(());
                }
                // The header is dropped once read: only the tensor list stays, in the stream.
                let header = self.stream.take_header().expect("parsed");
                header.check_quant(self.quant).map_err(js)?;
                let config = header.config().map_err(js)?;
                self.tokenizer = Some(crate::gguf::tokenizer(&header).map_err(js)?);
                let loader = GpuLoader::new(self.gpu.clone(), &config, None).labelled(header.quant_label());
                let sink = self.sink.insert(CheckedSink::new(&config, loader));
                self.stream.push(&[], sink).map_err(js)
            }
        }
    }

    /// The engine, once the whole file has been pushed.
    pub fn finish(&mut self) -> Result<WebEngine, JsValue> {
        self.stream.finish().map_err(js)?;
        let sink = self.sink.take().ok_or_else(|| usage("finish called twice"))?;
        let weights = sink.finish().map_err(js)?.finish().map_err(js)?;
        let tokenizer = self.tokenizer.take().expect("made with the sink");
        WebEngine::build(self.gpu.clone(), weights, tokenizer)
    }
}

/// SHA-256 of a stream fed chunk by chunk: the page checks a cached file against the hash its
/// source published (WebCrypto hashes only whole buffers).
#[wasm_bindgen]
pub struct Sha256Stream(sha2::Sha256);

#[wasm_bindgen]
impl Sha256Stream {
    #[wasm_bindgen(constructor)]
    #[allow(clippy::new_without_default)] // a JS constructor
    pub fn new() -> Sha256Stream {
        use sha2::Digest;
        Self(sha2::Sha256::new())
    }

    pub fn update(&mut self, chunk: &[u8]) {
        use sha2::Digest;
        self.0.update(chunk);
    }

    /// The digest as lower-case hex; the stream is consumed.
    pub fn hex(self) -> String {
        use sha2::Digest;
        self.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A model with its tokenizer. Methods return promises of JSON strings. One call at a time:
/// the engine is taken out for the duration, so an overlapping call is told it is busy; but
/// [`WebEngine::cancel`] works during a call (it needs only the cancel flag).
#[wasm_bindgen]
pub struct WebEngine {
    engine: Rc<RefCell<Option<Engine>>>,
    cancel: Rc<Cell<bool>>,
}

#[wasm_bindgen]
impl WebEngine {
    fn build(gpu: Rc<Gpu>, weights: GpuWeights, tokenizer: Tokenizer) -> Result<WebEngine, JsValue> {
        let engine = Engine::load(gpu, weights, tokenizer).map_err(js)?;
        let cancel = engine.model().cancel_flag();
        Ok(Self { engine: Rc::new(RefCell::new(Some(engine))), cancel })
    }

    /// Runs `work` with the engine taken out, and puts it back whatever the outcome. A cancel
    /// left over from an earlier call is cleared first.
    async fn with<T>(&self, work: impl AsyncFnOnce(&mut Engine) -> crate::Result<T>) -> Result<T, JsValue> {
        let mut engine = self.engine.borrow_mut().take().ok_or_else(|| usage("the engine is busy"))?;
        self.cancel.set(false);
        let result = work(&mut engine).await;
        engine.set_progress(None);
        *self.engine.borrow_mut() = Some(engine);
        result.map_err(js)
    }

    fn with_now<T>(&self, work: impl FnOnce(&Engine) -> crate::Result<T>) -> Result<T, JsValue> {
        let guard = self.engine.borrow();
        work(guard.as_ref().ok_or_else(|| usage("the engine is busy"))?).map_err(js)
    }

    /// Stops the running call at its next forward pass; it rejects with code `cancelled`, and
    /// the engine is ready for the next call.
    pub fn cancel(&self) {
        self.cancel.set(true);
    }

    /// Synthetic weights of a real model's shapes (`qwen2.5-0.5b`, `qwen2.5-1.5b`), made on the
    /// GPU (bf16), or quantized to `quant` (`q8_0`, `q5_0`, `q4_0`).
    pub fn synthetic(
        gpu: &WebGpu,
        name: &str,
        tokenizer_json: &[u8],
        tokenizer_config_json: &[u8],
        quant: Option<String>,
    ) -> Result<WebEngine, JsValue> {
        let config = Qwen2Config::named(name).map_err(js)?;
        let weights = crate::ops::synthetic_weights(&gpu.0, &config, parse_quant(quant)?).map_err(js)?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json, Some(tokenizer_config_json)).map_err(js)?;
        Self::build(gpu.0.clone(), weights, tokenizer)
    }

    /// Model facts as JSON: shapes, parameters, weight bytes per decode step, synthetic or not.
    pub fn info(&self) -> Result<String, JsValue> {
        self.with_now(|e| {
            let (c, weights) = (e.model().config(), e.model().weights());
            Ok(json(&serde_json::json!({
                "hidden_size": c.hidden_size,
                "layers": c.num_hidden_layers,
                "heads": c.num_attention_heads,
                "kv_heads": c.num_key_value_heads,
                "vocab_size": c.vocab_size,
                "parameters": c.parameter_count(),
                "quant": weights.label(),
                "decode_bytes": weights.decode_bytes(),
                "synthetic": weights.synthetic(),
            })))
        })
    }

    /// Judges one request (the CLI's request JSON) with `strategy` (a CLI name or `all`);
    /// resolves to the judgment JSON, or a JSON list of them for `all`. `sequence_logprobs`
    /// adds each choice's full-sequence log-probability to B's records. `progress` hears each
    /// forward pass before it runs (see [`crate::judge::Progress`], as JSON).
    pub async fn judge(
        &self,
        request_json: String,
        strategy: String,
        top_k: usize,
        sequence_logprobs: bool,
        progress: Option<js_sys::Function>,
    ) -> Result<String, JsValue> {
        let req: JudgeRequest = serde_json::from_str(&request_json)
            .map_err(|e| js_error(&format!("not a judgment request: {e}"), "input"))?;
        let strategies = Strategy::parse_list(&strategy).map_err(js)?;
        let options = JudgeOptions { top_k, sequence_logprobs };
        let out = self
            .with(async |e| {
                e.set_progress(progress.map(reporter));
                e.judge_all(&req, &strategies, options).await
            })
            .await?;
        Ok(if strategy == "all" { json(&out) } else { json(&out[0]) })
    }

    /// Judges a batch (strategy C); resolves to `{"batch": record, "judgments": [...]}`.
    #[wasm_bindgen(js_name = judgeBatch)]
    pub async fn judge_batch(
        &self,
        requests_json: String,
        shared_prefix: bool,
        progress: Option<js_sys::Function>,
    ) -> Result<String, JsValue> {
        let reqs: Vec<JudgeRequest> = serde_json::from_str(&requests_json)
            .map_err(|e| js_error(&format!("not a list of requests: {e}"), "input"))?;
        let (record, judgments) = self
            .with(async |e| {
                e.set_progress(progress.map(reporter));
                e.judge_batch(&reqs, PrefixSharing::from_flag(shared_prefix)).await
            })
            .await?;
        Ok(json(&serde_json::json!({ "batch": record, "judgments": judgments })))
    }

    /// Runs the benchmark ([`BenchOptions`] as JSON, every field optional: `lengths`,
    /// `batch_sizes`, `repeats`, `doc_tokens`, `profile`); `progress` is called with each step as
    /// it starts and its figures as it ends, as JSON ([`bench::BenchProgress`]: the page words
    /// them). Resolves to the report JSON (with `profile`, per-kernel GPU times: see
    /// [`crate::profile`]).
    pub async fn bench(&self, options_json: String, progress: js_sys::Function) -> Result<String, JsValue> {
        let options: BenchOptions =
            serde_json::from_str(&options_json).map_err(|e| js_error(&format!("bench options: {e}"), "input"))?;
        let mut report = |step: &bench::BenchProgress| {
            let _ = progress.call1(&JsValue::NULL, &JsValue::from_str(&json(step)));
        };
        let result = self.with(async |e| bench::run(e, &options, &mut report).await).await?;
        Ok(json(&result))
    }

    /// A quick measure of this device: `{"tokens", "prefill_ms", "decode_ms"}` of a prefill of
    /// `tokens` tokens and one decode step after it ([`Engine::probe`]).
    pub async fn probe(&self, tokens: usize) -> Result<String, JsValue> {
        Ok(json(&self.with(async |e| e.probe(tokens).await).await?))
    }

    /// Resolves once the GPU has finished the model's set-up (weights made or uploaded,
    /// pipelines compiled), or rejects with the error the device raised during it (code `gpu`):
    /// in the browser such errors arrive after the calls that caused them. The page awaits it
    /// before it calls a model loaded.
    pub async fn settled(&self) -> Result<(), JsValue> {
        self.with(async |e| e.model().gpu().settle().await).await
    }

    /// The last position's logits over the whole vocabulary for `ids` (a diagnostic: tests
    /// compare them with the native engine's).
    pub async fn logits(&self, ids: Vec<u32>) -> Result<Vec<f32>, JsValue> {
        Ok(self.with(async |e| e.logits(&ids).await).await?.logits)
    }

    /// Destroys the GPU device, as a driver reset or a GPU crash would: the next call fails
    /// with code `device_lost`. For testing that the page recovers.
    #[wasm_bindgen(js_name = loseDevice)]
    pub fn lose_device(&self) -> Result<(), JsValue> {
        self.with_now(|e| {
            e.model().gpu().device().destroy();
            Ok(())
        })
    }

    /// Token ids of `text` with the model's tokenizer (no chat template).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, JsValue> {
        self.with_now(|e| e.tokenizer().encode(text))
    }
}
