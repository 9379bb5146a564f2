//! Buffers: small helpers, packed weight matrices split into row chunks that each fit one
//! storage binding, and reading results back.

use std::cell::OnceCell;
use std::rc::Rc;

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::quant::WeightFormat;

/// What a [`Gpu::record_table`] is shared by: a name (its buffer's label) and two numbers
/// that its records follow from.
pub type RecordTableKey = (&'static str, u32, u32);

/// A weight matrix `[rows, cols]` in its file's dtype (two 16-bit values per u32 word, or one
/// f32) or quantized ([`crate::quant`]), split into row chunks so that no chunk exceeds the
/// device's binding limit. Kernels run once per chunk; a small matrix is one chunk. Where the
/// device reads weights from textures ([`Gpu::weight_textures`]), each chunk also has one, made
/// from its buffer on first use ([`PackedMatrix::textures`]).
pub struct PackedMatrix {
    rows: usize,
    cols: usize,
    format: WeightFormat,
    chunks: Vec<MatrixChunk>,
    textures: OnceCell<Vec<wgpu::Texture>>,
}

/// Texels (16 bytes each) in a row of a weight texture: linear_w_texture.wgsl's `TEXTURE_WIDTH`.
/// A power of two, so that a texel's row and column are a shift and a mask; its rows are whole
/// 256 bytes, as a copy from a buffer needs.
pub const WEIGHT_TEXTURE_WIDTH: u32 = 4096;
/// Bytes in a row of a weight texture.
const WEIGHT_TEXTURE_ROW_BYTES: u64 = WEIGHT_TEXTURE_WIDTH as u64 * 16;

/// A matrix frees its GPU memory when dropped: on the web wgpu drops a buffer without destroying
/// it, so the matrices of a load that failed or was cancelled, or of a model let go, would hold
/// GPU memory until the browser's garbage collector ran (a retry could run out of it meanwhile).
/// Work already submitted that reads it still completes.
impl Drop for PackedMatrix {
    fn drop(&mut self) {
        self.chunks.iter().for_each(|c| c.buffer.destroy());
        self.textures.get().into_iter().flatten().for_each(wgpu::Texture::destroy);
    }
}

/// Rows `row_start .. row_start + rows` of a [`PackedMatrix`].
pub struct MatrixChunk {
    pub buffer: wgpu::Buffer,
    pub row_start: usize,
    pub rows: usize,
}

impl PackedMatrix {
    /// Allocates (uninitialised) chunks for a `[rows, cols]` matrix.
    pub fn new(gpu: &Gpu, name: &str, rows: usize, cols: usize, format: WeightFormat) -> Result<Self> {
        if !cols.is_multiple_of(2) {
            return Err(Error::model_file(name, format!("{cols} columns: packed matrices need an even width")));
        }
        if let WeightFormat::Quant(q) = format {
            q.check_cols(name, cols)?;
        }
        let row_bytes = format.row_bytes(cols) as u64;
        let rows_per_chunk = Self::rows_per_chunk(gpu, row_bytes);
        gpu.check_binding(name, row_bytes)?;
        let chunks = (0..rows)
            .step_by(rows_per_chunk)
            .map(|row_start| {
                let rows = rows_per_chunk.min(rows - row_start);
                let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(name),
                    // Whole 16 bytes, so that kernels may read any row chunk as vec4s.
                    size: (rows as u64 * row_bytes).next_multiple_of(16),
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                MatrixChunk { buffer, row_start, rows }
            })
            .collect();
        Ok(Self { rows, cols, format, chunks, textures: OnceCell::new() })
    }

    /// Bytes a chunk may hold where weights are read from textures: a texture's rows at most, of
    /// [`WEIGHT_TEXTURE_WIDTH`] texels each.
    pub fn texture_chunk_bytes(max_texture_dimension_2d: u32) -> u64 {
        u64::from(max_texture_dimension_2d) * WEIGHT_TEXTURE_ROW_BYTES
    }

    /// Makes the textures ([`PackedMatrix::textures`]) and frees the chunks' buffers, for a
    /// matrix that only kernels reading textures will read from now on: its memory is held once,
    /// not twice. Writing it, or copying from it, afterwards is an error.
    pub fn keep_textures_only(&self, gpu: &Gpu) {
        self.textures(gpu);
        self.chunks.iter().for_each(|c| c.buffer.destroy());
    }

    /// The chunks as textures, one each, for linear_w_texture.wgsl: the chunk's words in order,
    /// [`WEIGHT_TEXTURE_WIDTH`] texels a row. Copied from the chunks' buffers when first asked
    /// for, so the matrix must be written by then (layers are built on loaded weights).
    pub fn textures(&self, gpu: &Gpu) -> &[wgpu::Texture] {
        self.textures.get_or_init(|| {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            let textures = self.chunks.iter().map(|c| texture_of(gpu, &mut encoder, &c.buffer)).collect();
            gpu.queue.submit([encoder.finish()]);
            textures
        })
    }

    /// Rows of `row_bytes` each that one chunk holds on `gpu` (at least 1).
    pub fn rows_per_chunk(gpu: &Gpu, row_bytes: u64) -> usize {
        (gpu.weight_chunk_bytes / row_bytes).max(1) as usize
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// How the values are stored.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The row chunks, each within one storage binding.
    pub fn chunks(&self) -> &[MatrixChunk] {
        &self.chunks
    }

    pub fn row_bytes(&self) -> u64 {
        self.format.row_bytes(self.cols) as u64
    }

    /// Total bytes of the matrix (what one full read of it costs).
    pub fn bytes(&self) -> u64 {
        self.rows as u64 * self.row_bytes()
    }

    /// Writes `bytes`, which start at byte `offset` of the whole matrix, into the right chunks.
    /// `offset` and the length must be multiples of 4 (wgpu's copy alignment).
    pub fn write(&self, gpu: &Gpu, mut offset: u64, mut bytes: &[u8]) {
        let row_bytes = self.row_bytes();
        for chunk in &self.chunks {
            let (start, end) = (chunk.row_start as u64 * row_bytes, (chunk.row_start + chunk.rows) as u64 * row_bytes);
            if bytes.is_empty() {
                break;
            }
            if offset >= end {
                continue;
            }
            let n = (end - offset).min(bytes.len() as u64) as usize;
            gpu.queue.write_buffer(&chunk.buffer, offset - start, &bytes[..n]);
            offset += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// Encodes a copy of all of `src`'s rows into this matrix from row `first` on (same format
    /// and width), chunk to chunk.
    pub fn copy_rows_from(&self, encoder: &mut wgpu::CommandEncoder, src: &PackedMatrix, first: usize) {
        debug_assert!(src.format == self.format && src.cols == self.cols && first + src.rows <= self.rows);
        let row_bytes = self.row_bytes();
        for from in &src.chunks {
            for to in &self.chunks {
                // Rows of this matrix that both chunks hold.
                let start = (first + from.row_start).max(to.row_start);
                let end = (first + from.row_start + from.rows).min(to.row_start + to.rows);
                if start < end {
                    let src_at = (start - first - from.row_start) as u64 * row_bytes;
                    let dst_at = (start - to.row_start) as u64 * row_bytes;
                    encoder.copy_buffer_to_buffer(
                        &from.buffer,
                        src_at,
                        &to.buffer,
                        dst_at,
                        (end - start) as u64 * row_bytes,
                    );
                }
            }
        }
    }

    /// The override constant that tells `packed.wgsl` how to read this matrix.
    pub fn dtype_constant(&self) -> (&'static str, f64) {
        ("DTYPE", f64::from(self.format.shader_code()))
    }
}

/// A texture holding `buffer` (whole 16 bytes, at most [`PackedMatrix::texture_chunk_bytes`]),
/// its copy encoded: the full rows, then the last row's texels.
fn texture_of(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder, buffer: &wgpu::Buffer) -> wgpu::Texture {
    let full_rows = (buffer.size() / WEIGHT_TEXTURE_ROW_BYTES) as u32;
    let tail = (buffer.size() % WEIGHT_TEXTURE_ROW_BYTES / 16) as u32;
    let height = full_rows + u32::from(tail > 0);
    let texture = gpu.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("weights"),
        size: wgpu::Extent3d { width: WEIGHT_TEXTURE_WIDTH, height, depth_or_array_layers: 1 },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba32Uint,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    let mut copy = |first_row: u32, width: u32, rows: u32| {
        let offset = u64::from(first_row) * WEIGHT_TEXTURE_ROW_BYTES;
        let layout = wgpu::TexelCopyBufferLayout {
            offset,
            bytes_per_row: Some(WEIGHT_TEXTURE_ROW_BYTES as u32),
            rows_per_image: None,
        };
        let origin = wgpu::Origin3d { x: 0, y: first_row, z: 0 };
        encoder.copy_buffer_to_texture(
            wgpu::TexelCopyBufferInfo { buffer, layout },
            wgpu::TexelCopyTextureInfo { texture: &texture, mip_level: 0, origin, aspect: wgpu::TextureAspect::All },
            wgpu::Extent3d { width, height: rows, depth_or_array_layers: 1 },
        );
    };
    if full_rows > 0 {
        copy(0, WEIGHT_TEXTURE_WIDTH, full_rows);
    }
    if tail > 0 {
        copy(full_rows, tail, 1);
    }
    texture
}

impl Gpu {
    /// A storage buffer of `size` bytes, zero-filled. Storage buffers are rounded up to whole
    /// 16 bytes, so a kernel may read any of them as vec4s (the tail of the last one is zero).
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.storage_as(label, size, wgpu::BufferUsages::empty())
    }

    /// [`Gpu::storage`] that kernels may also bind as a uniform (see `ops::linear_input`).
    pub fn storage_and_uniform(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.storage_as(label, size, wgpu::BufferUsages::UNIFORM)
    }

    /// A table of uniform records, `record(j)` at byte `j * self.record_stride()` for j below
    /// `records` at least, for a binding at a dynamic offset to pick one per dispatch. Shared
    /// by every caller with the same `key` (the records must follow from it alone); made anew,
    /// longer, when a caller needs more records than the table holds.
    pub fn record_table(
        &self,
        key: RecordTableKey,
        records: usize,
        record: impl Fn(usize) -> [u32; 4],
    ) -> Rc<wgpu::Buffer> {
        let mut tables = self.record_tables.borrow_mut();
        if let Some((held, table)) = tables.get(&key)
            && *held >= records
        {
            return table.clone();
        }
        let stride = self.record_stride() as usize;
        let mut bytes = vec![0u8; records.max(1) * stride];
        for (j, at) in bytes.chunks_exact_mut(stride).enumerate() {
            at[..16].copy_from_slice(bytemuck::bytes_of(&record(j)));
        }
        let table = Rc::new(self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(key.0),
            contents: &bytes,
            usage: wgpu::BufferUsages::UNIFORM,
        }));
        tables.insert(key, (records, table.clone()));
        table
    }

    /// Bytes between the records of a [`Gpu::record_table`]: the device's alignment of a
    /// uniform binding's dynamic offset.
    pub fn record_stride(&self) -> u32 {
        self.limits().min_uniform_buffer_offset_alignment.max(16)
    }

    fn storage_as(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16).next_multiple_of(16),
            usage: usage | wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A storage buffer holding `data` (zero-padded to whole 16 bytes, as [`Gpu::storage`]).
    pub fn storage_from<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> wgpu::Buffer {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().max(16).next_multiple_of(16), 0);
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: &padded,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        })
    }

    /// A uniform buffer holding `value` (a `#[repr(C)]` struct mirroring a WGSL `struct`).
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytemuck::bytes_of(value),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        })
    }

    /// A buffer the CPU can map to read results.
    pub fn staging(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Waits until the GPU has done all the work submitted so far, then reports any error the
    /// device raised meanwhile. In the browser some errors arrive late: a pipeline the browser's
    /// shader compiler rejects, an allocation it refuses, are reported after the call that made
    /// them has returned, and GPU-made weights are still being written. Awaited after a model
    /// is built, it turns those into the load's own error, not the first run's.
    pub async fn settle(&self) -> Result<()> {
        // A copy queued behind everything submitted: mapping its target waits for all of it.
        let (source, staging) = (self.storage("settle", 16), self.staging("settle", 16));
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&source, 0, &staging, 0, 16);
        self.queue.submit([encoder.finish()]);
        let read = read_buffer(self, &staging, 16).await;
        source.destroy();
        staging.destroy();
        read.map(drop)
    }
}

/// Destroys the buffers it names when dropped, however the function that made them returns:
/// wgpu on the web only drops a buffer, and its GPU memory waits for the garbage collector.
/// Made after the buffers, it is dropped before them.
pub struct DestroyOnDrop<'a>(pub Vec<&'a wgpu::Buffer>);

impl Drop for DestroyOnDrop<'_> {
    fn drop(&mut self) {
        self.0.iter().for_each(|b| b.destroy());
    }
}

/// Maps `staging` (a MAP_READ buffer whose copy has been submitted) and returns its first
/// `len` bytes. Natively this blocks until the GPU is done; in the browser it awaits.
pub async fn read_buffer(gpu: &Gpu, staging: &wgpu::Buffer, len: u64) -> Result<Vec<u8>> {
    Ok(read_buffer_timed(gpu, staging, len).await?.0)
}

/// [`read_buffer`], also returning the milliseconds spent copying out of the mapped buffer
/// once the GPU was done (the readback proper, as opposed to waiting for the GPU).
pub async fn read_buffer_timed(gpu: &Gpu, staging: &wgpu::Buffer, len: u64) -> Result<(Vec<u8>, f64)> {
    let slice = staging.slice(..len.max(4).next_multiple_of(4));
    let (done, mapped) = oneshot();
    slice.map_async(wgpu::MapMode::Read, move |r| done(r.map_err(|e| e.to_string())));
    #[cfg(not(target_arch = "wasm32"))]
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("waiting for the GPU failed: {e}")))?;
    if let Err(e) = mapped.await {
        gpu.check()?; // a lost device or an error the device raised says more than the map
        return Err(Error::Gpu(format!("reading results back failed: {e}")));
    }
    // Mapped from here: every way out unmaps, or the next forward's copy into this buffer
    // would fail validation and the engine would stay broken.
    let start = crate::clock::now_ms();
    let read = gpu.check().and_then(|()| {
        let view = slice.get_mapped_range().map_err(|e| Error::Gpu(format!("mapping failed: {e}")))?;
        Ok(view[..len as usize].to_vec())
    });
    staging.unmap();
    Ok((read?, crate::clock::now_ms() - start))
}

/// A one-value channel whose receiving end is a future: enough to await a map callback
/// without an async runtime.
fn oneshot<T: Send + 'static>() -> (impl FnOnce(T) + Send + 'static, impl std::future::Future<Output = T>) {
    use std::sync::{Arc, Mutex};
    use std::task::{Poll, Waker};
    type Shared<T> = Arc<Mutex<(Option<T>, Option<Waker>)>>;
    let shared: Shared<T> = Arc::new(Mutex::new((None, None)));
    let tx = shared.clone();
    let send = move |value: T| {
        let mut s = tx.lock().expect("not poisoned");
        s.0 = Some(value);
        if let Some(w) = s.1.take() {
            w.wake();
        }
    };
    let recv = std::future::poll_fn(move |cx| {
        let mut s = shared.lock().expect("not poisoned");
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    });
    (send, recv)
}

impl PackedMatrix {
    /// A matrix from f32 values, stored as `format` (see [`WeightFormat::encode`]).
    pub fn from_f32(
        gpu: &Gpu,
        name: &str,
        (rows, cols): (usize, usize),
        format: WeightFormat,
        values: &[f32],
    ) -> Result<Self> {
        assert_eq!(values.len(), rows * cols, "{name}: values for [{rows}, {cols}]");
        let m = Self::new(gpu, name, rows, cols, format)?;
        m.write(gpu, 0, &format.encode(values, cols));
        Ok(m)
    }
}

impl Gpu {
    /// Copies the first `len` bytes of `buffer` (a STORAGE | COPY_SRC buffer) to the CPU.
    /// For tests and diagnostics; the forward pass reads back through its own staging buffer.
    pub async fn download(&self, buffer: &wgpu::Buffer, len: u64) -> Result<Vec<u8>> {
        let staging = self.staging("download", len);
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, Some(len.next_multiple_of(4)));
        self.queue.submit([encoder.finish()]);
        read_buffer(self, &staging, len).await
    }

    /// [`Gpu::download`] of `n` f32 values.
    pub async fn download_f32(&self, buffer: &wgpu::Buffer, n: usize) -> Result<Vec<f32>> {
        let bytes = self.download(buffer, (n * 4) as u64).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
