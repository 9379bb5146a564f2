//! The KV cache on the GPU: allocated once for `slots` sequences of up to `capacity` tokens,
//! with an explicit length per slot. Layout per layer: keys and values `[slots * capacity,
//! kv_dim]` f32, sequence s at rows `s * capacity ..`. A slot can start from a copy of another
//! slot's prefix (a shared document prefilled once). [`crate::model::Model`] owns it and offers
//! its operations under the domain's names.

use crate::config::Qwen2Config;
use crate::error::{ContextLimit, Error, Result};
use crate::gpu::{Dispatcher, Gpu};
use crate::ops;

pub(super) struct KvCache {
    slots: usize,
    capacity: usize,
    kv_dim: usize,
    k: Vec<wgpu::Buffer>, // per layer [slots * capacity, kv_dim]
    v: Vec<wgpu::Buffer>, // per layer [slots * capacity, kv_dim]
    lens: Vec<usize>,
}

/// Destroyed when dropped (a resize replaces the cache): see `Drop for Activations`.
impl Drop for KvCache {
    fn drop(&mut self) {
        self.k.iter().chain(&self.v).for_each(wgpu::Buffer::destroy);
    }
}

impl KvCache {
    pub fn new(gpu: &Gpu, config: &Qwen2Config, slots: usize, capacity: usize) -> Result<Self> {
        if slots == 0 || capacity == 0 {
            return Err(Error::Input("the KV cache needs at least one slot of one token".into()));
        }
        let kv_dim = config.kv_dim();
        // In u64: on wasm32 a usize product wraps at sizes a device can hold.
        let bytes = slots as u64 * capacity as u64 * kv_dim as u64 * 4;
        gpu.check_binding(&format!("a KV cache of {slots} x {capacity} tokens"), bytes)?;
        let layer = |what: &str| (0..config.num_hidden_layers).map(|_| gpu.storage(what, bytes)).collect();
        Ok(Self { slots, capacity, kv_dim, k: layer("k_cache"), v: layer("v_cache"), lens: vec![0; slots] })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Layer `l`'s key and value buffers.
    pub fn layer(&self, l: usize) -> (&wgpu::Buffer, &wgpu::Buffer) {
        (&self.k[l], &self.v[l])
    }

    fn check_slot(&self, slot: usize) -> Result<()> {
        if slot >= self.slots {
            return Err(Error::Input(format!("KV slot {slot} does not exist ({} slots)", self.slots)));
        }
        Ok(())
    }

    /// Tokens held by `slot`.
    pub fn tokens_in(&self, slot: usize) -> Result<usize> {
        self.check_slot(slot)?;
        Ok(self.lens[slot])
    }

    /// First cache row of `slot` (which must exist).
    pub fn row_base(&self, slot: usize) -> usize {
        slot * self.capacity
    }

    /// Forgets `slot`'s tokens (the memory is reused as is).
    pub fn forget(&mut self, slot: usize) -> Result<()> {
        self.check_slot(slot)?;
        self.lens[slot] = 0;
        Ok(())
    }

    /// Keeps only the first `len` tokens of `slot` (at most what it holds): the next token
    /// is written at position `len`, over what was there.
    pub fn truncate(&mut self, slot: usize, len: usize) -> Result<()> {
        let held = self.tokens_in(slot)?;
        if len > held {
            return Err(Error::Input(format!("KV slot {slot} holds {held} tokens, so it cannot keep {len}")));
        }
        self.lens[slot] = len;
        Ok(())
    }

    pub fn forget_all(&mut self) {
        self.lens.fill(0);
    }

    /// Checks that `slot` exists and can take `more` tokens.
    pub fn check_room(&self, slot: usize, more: usize) -> Result<()> {
        let total = self.tokens_in(slot)? + more;
        if total > self.capacity {
            return Err(Error::ContextOverflow {
                tokens: total,
                limit: ContextLimit::KvCache { capacity: self.capacity },
            });
        }
        Ok(())
    }

    /// Records `by` tokens written to `slot` (checked by [`KvCache::check_room`] before).
    pub fn advance(&mut self, slot: usize, by: usize) {
        self.lens[slot] += by;
    }

    /// Makes `to` hold a copy of the first `len` tokens of `from` (all layers), so a shared
    /// prefix is computed once and then continued by several sequences.
    pub fn copy_prefix(&mut self, gpu: &Gpu, from: usize, to: usize, len: usize) -> Result<()> {
        let held = self.tokens_in(from)?;
        self.check_slot(to)?;
        if len > held {
            return Err(Error::Input(format!("slot {from} holds {held} tokens, not {len}")));
        }
        if from != to && len > 0 {
            let (src, dst) = (self.row_base(from) as u32, self.row_base(to) as u32);
            let mut encoder = gpu.device().create_command_encoder(&Default::default());
            {
                let mut pass = Dispatcher::new(&mut encoder, "kv copy", None);
                for (k, v) in self.k.iter().zip(&self.v) {
                    let shape = ops::KvCopyShape { src, dst, rows: len as u32, kv_dim: self.kv_dim as u32 };
                    ops::kv_copy(gpu, &mut pass, (k, v), shape);
                }
            }
            gpu.queue().submit([encoder.finish()]);
        }
        self.lens[to] = len;
        Ok(())
    }
}
