//! The KV cache on the GPU: allocated once for `slots` sequences of up to `capacity` tokens,
//! with an explicit length per slot. Layout per layer: keys and values `[slots * capacity,
//! kv_dim]` f32, sequence s at rows `s * capacity ..`. A slot can start from a copy of another
//! slot's prefix (a shared document prefilled once).

use crate::config::Qwen2Config;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::ops;

pub struct KvCache {
    pub slots: usize,
    pub capacity: usize,
    kv_dim: usize,
    pub(crate) k: Vec<wgpu::Buffer>, // per layer [slots * capacity, kv_dim]
    pub(crate) v: Vec<wgpu::Buffer>, // per layer [slots * capacity, kv_dim]
    lens: Vec<usize>,
}

impl KvCache {
    pub fn new(gpu: &Gpu, config: &Qwen2Config, slots: usize, capacity: usize) -> Result<Self> {
        if slots == 0 || capacity == 0 {
            return Err(Error::Input("the KV cache needs at least one slot of one token".into()));
        }
        let kv_dim = config.kv_dim();
        let bytes = (slots * capacity * kv_dim * 4) as u64;
        gpu.check_binding(&format!("a KV cache of {slots} x {capacity} tokens"), bytes)?;
        let layer = |what: &str| (0..config.num_hidden_layers).map(|_| gpu.storage(what, bytes)).collect();
        Ok(Self { slots, capacity, kv_dim, k: layer("k_cache"), v: layer("v_cache"), lens: vec![0; slots] })
    }

    /// Tokens held by `slot`.
    pub fn len(&self, slot: usize) -> usize {
        self.lens[slot]
    }

    pub fn is_empty(&self, slot: usize) -> bool {
        self.lens[slot] == 0
    }

    /// Forgets `slot`'s tokens (the memory is reused as is).
    pub fn reset(&mut self, slot: usize) {
        self.lens[slot] = 0;
    }

    pub fn reset_all(&mut self) {
        self.lens.fill(0);
    }

    /// Checks that `slot` exists and can take `more` tokens.
    pub(crate) fn check_room(&self, slot: usize, more: usize) -> Result<()> {
        if slot >= self.slots {
            return Err(Error::Input(format!("KV slot {slot} does not exist ({} slots)", self.slots)));
        }
        let total = self.lens[slot] + more;
        if total > self.capacity {
            return Err(Error::ContextOverflow {
                tokens: total,
                limit: format!("the KV cache holds {} tokens per sequence", self.capacity),
            });
        }
        Ok(())
    }

    pub(crate) fn advance(&mut self, slot: usize, by: usize) {
        self.lens[slot] += by;
    }

    /// Makes `to` hold a copy of the first `len` tokens of `from` (all layers), so a shared
    /// prefix is computed once and then continued by several sequences.
    pub fn copy_prefix(&mut self, gpu: &Gpu, from: usize, to: usize, len: usize) -> Result<()> {
        if from >= self.slots || to >= self.slots {
            return Err(Error::Input(format!("KV slot {} does not exist ({} slots)", from.max(to), self.slots)));
        }
        if len > self.lens[from] {
            return Err(Error::Input(format!("slot {from} holds {} tokens, not {len}", self.lens[from])));
        }
        if from != to && len > 0 {
            let (src, dst) = ((from * self.capacity) as u32, (to * self.capacity) as u32);
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = crate::gpu::Dispatcher::new(&mut encoder, "kv copy", None);
                for (k, v) in self.k.iter().zip(&self.v) {
                    let shape = ops::KvCopyShape { src, dst, rows: len as u32, kv_dim: self.kv_dim as u32 };
                    ops::kv_copy(gpu, &mut pass, (k, v), shape);
                }
            }
            gpu.queue.submit([encoder.finish()]);
        }
        self.lens[to] = len;
        Ok(())
    }
}
