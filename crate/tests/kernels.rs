//! Every WGSL kernel against its CPU reference (reference.rs) on seeded inputs, at odd sizes
//! (not workgroup multiples) and at the real Qwen2.5 sizes (0.5B: 896 / 4864 / head 64, 14:2;
//! 1.5B: 1536 / 8960 / head 128, 12:2), on a real Vulkan device (lavapipe in CI).

mod common;

use common::*;
use onetoken::gpu::{Dispatcher, Gpu, GpuOptions, KernelFamily, PackedMatrix, WEIGHT_TEXTURE_WIDTH};
use onetoken::ops;
use onetoken::quant::{Quant, WeightFormat};
use onetoken::reference;
use onetoken::weights::Dtype;

const BF16: WeightFormat = WeightFormat::Float(Dtype::BF16);
/// Every format a weight matrix can have on the GPU.
const FORMATS: [WeightFormat; 8] = [
    BF16,
    WeightFormat::Float(Dtype::F16),
    WeightFormat::Float(Dtype::F32),
    WeightFormat::Quant(Quant::Q8_0),
    WeightFormat::Quant(Quant::Q5_0),
    WeightFormat::Quant(Quant::Q4_0),
    WeightFormat::Quant(Quant::Q4_K),
    WeightFormat::Quant(Quant::Q6_K),
];

/// The formats a [_, k] matrix can have (quantized rows are whole blocks); bf16 alone for a
/// `big` case (lavapipe time).
fn formats_for(k: usize, big: bool) -> impl Iterator<Item = WeightFormat> {
    FORMATS.into_iter().filter(move |&format| match format {
        WeightFormat::Quant(q) => !big && k.is_multiple_of(q.block_type().values()),
        _ => format == BF16 || !big,
    })
}

/// A linear layer's seeded inputs and its CPU reference result: x [M, K], w [N, K] (rounded to
/// `format`), b [N], y0 [M, N] (what y holds before), want [M, N] (with b if `bias`, plus y0 if
/// `accumulate`).
struct LinearCase {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    y0: Vec<f32>,
    want: Vec<f32>,
}

fn linear_case(
    seed: u64,
    (m, k, n): (usize, usize, usize),
    format: WeightFormat,
    bias: bool,
    accumulate: bool,
) -> LinearCase {
    let x = seeded(seed, m * k, 1.0);
    let w = format.round(&seeded(seed + 1, n * k, 0.1), k);
    let b = seeded(seed + 2, n, 0.5);
    let y0 = seeded(seed + 3, m * n, 1.0);
    let mut want = reference::linear(&x, &w, bias.then_some(&b[..]), k);
    if accumulate {
        want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
    }
    LinearCase { x, w, b, y0, want }
}

fn gpu() -> Gpu {
    Gpu::new_blocking(GpuOptions::default()).expect("a Vulkan device (lavapipe in CI)")
}

/// Both linear-layer families are tested on every device: lavapipe would pick the direct one.
const FAMILIES: [KernelFamily; 2] = [KernelFamily::Tiled, KernelFamily::Direct];

fn family_gpu(family: KernelFamily, weight_chunk_bytes: Option<u64>) -> Gpu {
    Gpu::new_blocking(GpuOptions { kernels: Some(family), weight_chunk_bytes, ..Default::default() }).unwrap()
}

fn small_binding_gpu(bytes: u64) -> Gpu {
    Gpu::new_blocking(GpuOptions { weight_chunk_bytes: Some(bytes), ..Default::default() }).unwrap()
}

fn run(gpu: &Gpu, encode: impl FnOnce(&mut Dispatcher)) {
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    {
        let mut pass = Dispatcher::new(&mut encoder, "test", None);
        encode(&mut pass);
    }
    gpu.queue().submit([encoder.finish()]);
}

fn read(gpu: &Gpu, buffer: &wgpu::Buffer, n: usize) -> Vec<f32> {
    pollster::block_on(gpu.download_f32(buffer, n)).unwrap()
}

fn u32s(gpu: &Gpu, name: &str, v: &[u32]) -> wgpu::Buffer {
    gpu.storage_from(name, v)
}

/// `Tokens` uniform of matmul/matvec: M in the first field.
fn tokens(gpu: &Gpu, m: usize) -> wgpu::Buffer {
    gpu.uniform("tokens", &[m as u32, 0, 0, 0])
}

#[test]
fn tiled_linear_matches_reference_at_odd_and_real_sizes() {
    linear_cases(&family_gpu(KernelFamily::Tiled, None), KernelFamily::Tiled);
}

/// The direct family's kernel depends on the device: lavapipe runs linear_blocks.wgsl, others
/// (SwiftShader, the browser's CPU WebGPU) linear_direct.wgsl. scripts/test.sh runs this test a
/// second time on SwiftShader's Vulkan driver so that both are tested natively.
#[test]
fn direct_linear_matches_reference_at_odd_and_real_sizes() {
    let gpu = family_gpu(KernelFamily::Direct, None);
    eprintln!("direct linear kernels on {}", gpu.describe());
    linear_cases(&gpu, KernelFamily::Direct);
}

fn linear_cases(gpu: &Gpu, family: KernelFamily) {
    // (M, K, N): decode rows (matvec when K % 8 == 0) and prefill tiles (matmul, 32 x 32 tiles
    // for small grids, 64 x 64 for large), odd and real sizes.
    let cases: [(usize, usize, usize); _] = [
        (1, 6, 5),
        (3, 70, 33),
        (8, 130, 67),
        (9, 70, 33),
        (67, 130, 129),
        (5, 896, 896),
        (1, 896, 4864),
        (33, 4864, 896),
        (7, 1536, 256),
        (130, 1536, 8960),
        (200, 70, 4100), // enough tiles for the 64 x 64 matmul, at odd sizes
        (17, 64, 33),    // matvec in blocks of 8 token rows: 8 + 8 + 1
        (32, 896, 4864), // the most rows matvec takes
        (33, 896, 896),  // the fewest matmul takes when K allows matvec
        (3, 96, 33),     // quantized blocks at odd M and N: matvec
        (67, 160, 129),  // and matmul
        (3, 256, 33),    // Q4_K super-blocks at odd M and N: matvec
        (67, 512, 129),  // and matmul
        (40, 72, 33),    // K % 16 == 8: matmul's last 16-wide step is half past K
        (3, 72, 33),     // and matvec's
        (1, 4864, 896),  // matvec 64 lanes wide (K >= 2,048 without a folded norm): down_proj
        (9, 2048, 37),   // and at odd N, 8 + 1 token rows
        (1, 8960, 1536), // Qwen2.5-1.5B's down_proj in a decode step
        (1, 16400, 5),   // one token row past a uniform window of x: lavapipe reads it as storage
    ];
    let lavapipe = family == KernelFamily::Direct && gpu.info().name.contains("llvmpipe");
    assert_eq!(gpu.weight_textures(), lavapipe, "weights read from textures");
    for (i, &(m, k, n)) in cases.iter().enumerate() {
        for format in FORMATS {
            let quantized = matches!(format, WeightFormat::Quant(_));
            if let WeightFormat::Quant(q) = format
                && !k.is_multiple_of(q.block_type().values())
            {
                continue; // quantized rows are whole blocks (of 32; Q4_K: 256)
            }
            // Float formats differ in unpacking only: the big cases stay bf16. Quantized ones
            // also cover the real sizes of decode (matvec) and prefill (matmul), but not the
            // largest case (lavapipe time).
            if (!quantized && format != BF16 && k > 1000) || (quantized && m * k * n > 150_000_000) {
                continue;
            }
            for (bias, accumulate) in [(false, false), (true, true)] {
                let LinearCase { x, w, b, y0, want } =
                    linear_case((i * 10) as u64, (m, k, n), format, bias, accumulate);
                let wm = PackedMatrix::from_f32(gpu, "w", (n, k), format, &w).unwrap();
                // x as the model holds it: lavapipe reads one token row of it through a uniform.
                let xb = ops::linear_input(gpu, "x", (x.len() * 4) as u64);
                gpu.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&x));
                let (bb, yb) = (gpu.storage_from("b", &b), gpu.storage_from("y", &y0));
                let t = tokens(gpu, m);
                let b_used = bias.then_some(&bb);
                let io = ops::LinearBuffers::whole(&t, &xb, b_used, &yb, n);
                let store = if accumulate { ops::Store::Accumulate } else { ops::Store::Overwrite };
                let op = ops::Linear::new(gpu, &wm, io, store);
                run(gpu, |p| op.encode(p, m as u32));
                let what = format!("linear {family:?} M={m} K={k} N={n} {} bias={bias}", format.name());
                let window = lavapipe.then(|| x_window_rows(gpu, m, k)).flatten();
                assert_eq!(op.x_window_rows(m as u32), window, "{what}: x read through uniform windows");
                assert_close(&read(gpu, &yb, m * n), &want, 1e-4, 1e-4, &what);
            }
        }
    }
}

/// Token rows of the uniform windows through which lavapipe reads x for `m` token rows (its
/// blocks' rows, 1, 4 or 16, where so many rows of K values fit in 64 KiB less an alignment's
/// slack, else as many as fit where that is at least half the block), as 0.5B's and 1.5B's
/// shapes show.
fn x_window_rows(gpu: &Gpu, m: usize, k: usize) -> Option<u32> {
    let block = match m {
        1 => 1,
        2..=4 => 4,
        _ => 16,
    };
    let fit = ((ops::LINEAR_X_UNIFORM_BYTES as usize - gpu.record_stride() as usize) / (4 * k)).min(block);
    let rows = (fit > 0 && 2 * fit >= block).then_some(fit as u32);
    match (m, k) {
        (1, 896 | 4864 | 8960) => assert_eq!(rows, Some(1)),
        (5.., 896) => assert_eq!(rows, Some(16)),
        (5.., 1536) => assert_eq!(rows, Some(10)),
        (5.., 4864) | (1, 16400) => assert_eq!(rows, None),
        _ => {}
    }
    rows
}

/// `[M, cols]` laid out in parts of `part` columns: `[cols / part][M][part]` (linear.wgsl's
/// Y_PART), and back.
fn to_parts(v: &[f32], m: usize, cols: usize, part: usize) -> Vec<f32> {
    let mut out = vec![0.0; m * cols];
    for (i, &value) in v.iter().enumerate() {
        let (row, col) = (i / cols, i % cols);
        out[(col / part * m + row) * part + col % part] = value;
    }
    out
}
fn from_parts(v: &[f32], m: usize, cols: usize, part: usize) -> Vec<f32> {
    (0..m * cols).map(|i| v[(i % cols / part * m + i / cols) * part + i % cols % part]).collect()
}

/// lavapipe keeps an activation too wide for a window of 16 token rows (the MLP's) in parts: the
/// layers before it write y so, and the layer after it reads x a part at a time, adding each
/// part's dot products (the bias once). Against the CPU reference at 0.5B's and 1.5B's widths,
/// decode and prefill rows (a window and a part), float and quantized rows, weights in one
/// binding and split over several.
#[test]
fn lavapipe_linear_layers_read_and_write_activations_in_parts() {
    let gpu = family_gpu(KernelFamily::Direct, None);
    if !gpu.info().name.contains("llvmpipe") {
        assert_eq!(ops::activation_part(&gpu, 4864), 0, "parts are lavapipe's alone");
        eprintln!("skipped: {} keeps activations whole", gpu.describe());
        return;
    }
    assert_eq!([896, 130, 4870].map(|cols| ops::activation_part(&gpu, cols)), [0, 0, 0], "whole rows fit, or no parts");
    assert_eq!(ops::activation_part(&gpu, 4864), 608);
    assert_eq!(ops::activation_part(&gpu, 8960), 896);
    let split = family_gpu(KernelFamily::Direct, Some(65_536));
    let q8 = WeightFormat::Quant(Quant::Q8_0);
    let q4k = WeightFormat::Quant(Quant::Q4_K);
    // (M, K, N, format, weights split over bindings): x in parts (K the activation's width).
    let reading = [
        (1, 4864, 67, BF16, false),
        (37, 4864, 67, BF16, false),
        (37, 4864, 67, q8, true),
        (17, 4864, 33, q4k, false),
        (3, 4864, 9, WeightFormat::Float(Dtype::F32), false),
        (17, 8960, 33, BF16, false),
    ];
    for (i, &(m, k, n, format, split_weights)) in reading.iter().enumerate() {
        let gpu = if split_weights { &split } else { &gpu };
        let part = ops::activation_part(gpu, k);
        let LinearCase { x, w, b, y0, want } = linear_case(500 + 10 * i as u64, (m, k, n), format, true, true);
        let wm = PackedMatrix::from_f32(gpu, "w", (n, k), format, &w).unwrap();
        assert_eq!(wm.chunks().len() > 1, split_weights);
        let xb = ops::linear_input(gpu, "x", (x.len() * 4) as u64);
        gpu.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&to_parts(&x, m, k, part)));
        let (bb, yb, t) = (gpu.storage_from("b", &b), gpu.storage_from("y", &y0), tokens(gpu, m));
        let io = ops::LinearBuffers { x_part: part, ..ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n) };
        let op = ops::Linear::new(gpu, &wm, io, ops::Store::Accumulate);
        run(gpu, |p| op.encode(p, m as u32));
        let what = format!("x in parts of {part}: M={m} K={k} N={n} {}", format.name());
        assert_close(&read(gpu, &yb, m * n), &want, 1e-4, 1e-4, &what);
    }
    // (M, K, N, weights split): y in parts (N the activation's width), as gate_proj writes it.
    for (i, &(m, k, n, split_weights)) in
        [(1, 896, 4864, false), (37, 896, 4864, true), (5, 64, 8960, false)].iter().enumerate()
    {
        let gpu = if split_weights { &split } else { &gpu };
        let part = ops::activation_part(gpu, n);
        let LinearCase { x, w, b, want, .. } = linear_case(600 + 10 * i as u64, (m, k, n), BF16, true, false);
        let wm = PackedMatrix::from_f32(gpu, "w", (n, k), BF16, &w).unwrap();
        assert_eq!(wm.chunks().len() > 1, split_weights);
        let xb = ops::linear_input(gpu, "x", (x.len() * 4) as u64);
        gpu.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&x));
        let (bb, yb, t) = (gpu.storage_from("b", &b), gpu.storage("y", (m * n * 4) as u64), tokens(gpu, m));
        let io = ops::LinearBuffers { y_part: part, ..ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n) };
        let op = ops::Linear::new(gpu, &wm, io, ops::Store::Overwrite);
        run(gpu, |p| op.encode(p, m as u32));
        let what = format!("y in parts of {part}: M={m} K={k} N={n}");
        assert_close(&from_parts(&read(gpu, &yb, m * n), m, n, part), &want, 1e-4, 1e-4, &what);
    }
}

/// matvec in either workgroup shape, whatever K (the decode microbenchmark times both): at odd
/// sizes, at short and long rows, in blocks of 8 token rows, bias and accumulate, a float and a
/// quantized format. The shape the layer would pick is asked for too, and the direct family
/// runs no matvec at all.
#[test]
fn matvec_in_either_workgroup_shape_matches_reference() {
    let gpu = family_gpu(KernelFamily::Tiled, None);
    for (i, &(m, k, n)) in [(1, 72, 33), (1, 96, 5), (9, 896, 37), (3, 4864, 67)].iter().enumerate() {
        // Quantized rows are whole blocks of 32.
        for format in formats_for(k, false).filter(|&f| f == BF16 || f == WeightFormat::Quant(Quant::Q8_0)) {
            for lanes in ops::MATVEC_LANES {
                let LinearCase { x, w, b, y0, want } = linear_case(100 + i as u64, (m, k, n), format, true, true);
                let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), format, &w).unwrap();
                let (xb, bb, yb) = (gpu.storage_from("x", &x), gpu.storage_from("b", &b), gpu.storage_from("y", &y0));
                let t = tokens(&gpu, m);
                let io = || ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n);
                let picked = ops::Linear::new(&gpu, &wm, io(), ops::Store::Accumulate).matvec_lanes();
                assert_eq!(picked, Some(if k >= 2048 { 64 } else { 32 }), "K={k}");
                let op = ops::Linear::with_matvec_lanes(&gpu, &wm, io(), ops::Store::Accumulate, lanes).unwrap();
                assert_eq!(op.matvec_lanes(), Some(lanes));
                run(&gpu, |p| op.encode(p, m as u32));
                let what = format!("matvec {lanes} lanes M={m} K={k} N={n} {}", format.name());
                assert_close(&read(&gpu, &yb, m * n), &want, 1e-4, 1e-4, &what);
            }
        }
    }
    let direct = family_gpu(KernelFamily::Direct, None);
    let wm = PackedMatrix::from_f32(&direct, "w", (8, 64), BF16, &[0.0; 512]).unwrap();
    let (t, x, y) = (tokens(&direct, 1), direct.storage("x", 256), direct.storage("y", 32));
    let io = ops::LinearBuffers::whole(&t, &x, None, &y, 8);
    assert!(ops::Linear::with_matvec_lanes(&direct, &wm, io, ops::Store::Overwrite, 32).is_none());
}

/// lavapipe's direct kernels read the weights from textures of WEIGHT_TEXTURE_WIDTH texels a
/// row (linear_w_texture.wgsl), copied from the matrix's chunks: a chunk of less than a texture
/// row, of whole rows, and of whole rows and a tail, one chunk or several, read as written.
#[test]
fn lavapipe_reads_weights_from_textures_of_whole_rows_and_a_tail() {
    let gpu = family_gpu(KernelFamily::Direct, None);
    if !gpu.info().name.contains("llvmpipe") {
        assert!(!gpu.weight_textures(), "textures are lavapipe's alone");
        return;
    }
    assert!(gpu.weight_textures());
    assert!(!family_gpu(KernelFamily::Tiled, None).weight_textures(), "the tiled family reads storage");
    // bf16 rows of K = 1,024 values: 2 KiB, 32 to a texture row of 64 KiB.
    let k = 1024;
    let per_texture_row = WEIGHT_TEXTURE_WIDTH as usize * 16 / (2 * k);
    assert_eq!(per_texture_row, 32);
    // (weight rows, weight rows per chunk, each chunk's texture rows)
    let cases: [(usize, Option<usize>, &[u32]); 4] =
        [(5, None, &[1]), (64, None, &[2]), (67, None, &[3]), (67, Some(40), &[2, 1])];
    for (i, (n, chunk_rows, heights)) in cases.into_iter().enumerate() {
        let gpu = family_gpu(KernelFamily::Direct, chunk_rows.map(|r| (r * 2 * k) as u64));
        for m in [1, 3, 20] {
            let LinearCase { x, w, b, y0, want } = linear_case(100 + i as u64, (m, k, n), BF16, true, false);
            let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), BF16, &w).unwrap();
            let xb = ops::linear_input(&gpu, "x", (x.len() * 4) as u64);
            gpu.queue().write_buffer(&xb, 0, bytemuck::cast_slice(&x));
            let (bb, yb) = (gpu.storage_from("b", &b), gpu.storage_from("y", &y0));
            let t = tokens(&gpu, m);
            let op = ops::Linear::new(
                &gpu,
                &wm,
                ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n),
                ops::Store::Overwrite,
            );
            let textures: Vec<u32> = wm.textures(&gpu).iter().map(|t| t.height()).collect();
            assert_eq!(textures, heights, "N={n}: texture rows per chunk");
            run(&gpu, |p| op.encode(p, m as u32));
            assert_close(&read(&gpu, &yb, m * n), &want, 1e-4, 1e-4, &format!("textured weights M={m} N={n}"));
        }
    }
}

#[test]
fn linear_over_split_weights_equals_unsplit() {
    // A binding limit of 4 KiB splits a [300, 96] bf16 matrix (192 B rows) into 15 chunks. The
    // layer writes columns 7..307 of a 310-wide output (as a part of the QKV projection does);
    // the other columns keep what they held.
    let (m, k, n, first_col, out_cols) = (10, 96, 300, 7, 310);
    let x = seeded(1, m * k, 1.0);
    let w = Dtype::BF16.round(&seeded(2, n * k, 0.1));
    let b = seeded(3, n, 0.5);
    let y0 = seeded(4, m * out_cols, 1.0);
    let layer = reference::linear(&x, &w, Some(&b), k);
    for (rows, family) in [(2usize, KernelFamily::Tiled), (8, KernelFamily::Tiled), (10, KernelFamily::Direct)] {
        let gpu = family_gpu(family, Some(4096));
        let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), BF16, &w).unwrap();
        assert_eq!(wm.chunks().len(), 15);
        let (xb, bb) = (gpu.storage_from("x", &x[..rows * k]), gpu.storage_from("b", &b));
        let yb = gpu.storage_from("y", &y0[..rows * out_cols]);
        let t = tokens(&gpu, rows);
        let io = ops::LinearBuffers { out_cols, first_col, ..ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n) };
        let op = ops::Linear::new(&gpu, &wm, io, ops::Store::Overwrite);
        run(&gpu, |p| op.encode(p, rows as u32));
        let mut want = y0[..rows * out_cols].to_vec();
        for r in 0..rows {
            want[r * out_cols + first_col..][..n].copy_from_slice(&layer[r * n..][..n]);
        }
        assert_close(&read(&gpu, &yb, rows * out_cols), &want, 1e-4, 1e-4, &format!("split linear {family:?}"));
    }
}

#[test]
fn matmul_split_over_k_equals_the_reference() {
    let gpu = family_gpu(KernelFamily::Tiled, None);
    let partials = ops::SplitPartials::new(&gpu).expect("the tiled family splits K");
    // (M, K, N, split): a prefill of few 32 x 32 tiles splits a K of 512 or more into parts of
    // at least 256 (at most 8 parts); the sum pass is a second dispatch. 0.5B's and 1.5B's
    // down_proj and 1.5B's o_proj at prefill sizes; 252 tiles, the most that split, in 8 parts
    // (the partials buffer full); 280 tiles, unsplit; 0.5B's o_proj (K = 896, 3 parts of 304,
    // 304 and 288) at 64 and 128 tokens; a K under 512, unsplit; matvec's rows (M <= 32) where K
    // allows matvec, else matmul splits at any M; K % 16 == 8 (the last part ends half a step
    // past K); parts that K does not divide; quantized blocks.
    let cases: [(usize, usize, usize, bool); 14] = [
        (33, 4864, 896, true),
        (128, 4864, 896, true),
        (288, 4864, 896, true),
        (289, 4864, 896, false),
        (65, 8960, 1536, true),
        (40, 1536, 1536, true),
        (64, 896, 896, true),
        (128, 896, 896, true),
        (100, 504, 40, false),
        (3, 1096, 33, false),
        (3, 1098, 33, true),
        (40, 1048, 33, true),
        (100, 1600, 70, true),
        (67, 2560, 129, true),
    ];
    for (i, &(m, k, n, split)) in cases.iter().enumerate() {
        for format in formats_for(k, m * k * n > 20_000_000) {
            for (bias, accumulate) in [(false, false), (true, true)] {
                let seed = 400 + (i * 10) as u64;
                let LinearCase { x, w, b, y0, want } = linear_case(seed, (m, k, n), format, bias, accumulate);
                let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), format, &w).unwrap();
                let (xb, bb, yb) = (gpu.storage_from("x", &x), gpu.storage_from("b", &b), gpu.storage_from("y", &y0));
                let t = tokens(&gpu, m);
                let (bias, partials) = (bias.then_some(&bb), Some(&partials));
                let io = ops::LinearBuffers { partials, ..ops::LinearBuffers::whole(&t, &xb, bias, &yb, n) };
                let store = if accumulate { ops::Store::Accumulate } else { ops::Store::Overwrite };
                let op = ops::Linear::new(&gpu, &wm, io, store);
                let mut listing = Vec::new();
                op.encode(&mut Dispatcher::listing(&mut listing), m as u32);
                let what = format!("split-K M={m} K={k} N={n} {} bias={}", format.name(), bias.is_some());
                assert_eq!(listing.len(), 1 + usize::from(split), "{what}: dispatches");
                run(&gpu, |p| op.encode(p, m as u32));
                assert_close(&read(&gpu, &yb, m * n), &want, 1e-4, 1e-4, &what);
            }
        }
    }
    // Over weights split into chunks by a 64 KiB binding limit (31 rows of K = 1,048), into
    // columns 5..75 of an 80-wide output: each chunk splits, and they share the partials.
    let gpu = family_gpu(KernelFamily::Tiled, Some(65_536));
    let partials = ops::SplitPartials::new(&gpu).expect("the tiled family splits K");
    let (m, k, n, first_col, out_cols) = (40, 1048, 70, 5, 80);
    let (x, w, b) = (seeded(1, m * k, 1.0), Dtype::BF16.round(&seeded(2, n * k, 0.1)), seeded(3, n, 0.5));
    let y0 = seeded(4, m * out_cols, 1.0);
    let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), BF16, &w).unwrap();
    assert_eq!(wm.chunks().len(), 3);
    let (xb, bb, yb, t) =
        (gpu.storage_from("x", &x), gpu.storage_from("b", &b), gpu.storage_from("y", &y0), tokens(&gpu, m));
    let whole = ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n);
    let io = ops::LinearBuffers { out_cols, first_col, partials: Some(&partials), ..whole };
    let op = ops::Linear::new(&gpu, &wm, io, ops::Store::Accumulate);
    let mut listing = Vec::new();
    op.encode(&mut Dispatcher::listing(&mut listing), m as u32);
    assert_eq!(listing.len(), 6);
    run(&gpu, |p| op.encode(p, m as u32));
    let layer = reference::linear(&x, &w, Some(&b), k);
    let mut want = y0.clone();
    for r in 0..m {
        want[r * out_cols + first_col..][..n].iter_mut().zip(&layer[r * n..][..n]).for_each(|(a, v)| *a += v);
    }
    assert_close(&read(&gpu, &yb, m * out_cols), &want, 1e-4, 1e-4, "split-K over chunks");
}

#[test]
fn matrices_copied_into_one_equal_their_concatenation() {
    // Parts of 300, 45 and 45 rows, split into chunks by a 4 KiB binding limit at other row
    // boundaries than the whole, copied into one [390, 96] matrix (as Q, K and V are fused).
    let (m, k) = (3, 96);
    let x = seeded(1, m * k, 1.0);
    for format in [BF16, WeightFormat::Quant(Quant::Q4_0)] {
        let gpu = family_gpu(KernelFamily::Tiled, Some(4096));
        let part = |(i, n): (usize, &usize)| format.round(&seeded(10 + i as u64, n * k, 0.1), k);
        let parts: Vec<Vec<f32>> = [300, 45, 45].iter().enumerate().map(part).collect();
        let whole: Vec<f32> = parts.concat();
        let fused = PackedMatrix::new(&gpu, "fused", whole.len() / k, k, format).unwrap();
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        let mut row = 0;
        // Kept until the copies are submitted: a dropped matrix is destroyed.
        let sources: Vec<PackedMatrix> =
            parts.iter().map(|p| PackedMatrix::from_f32(&gpu, "part", (p.len() / k, k), format, p).unwrap()).collect();
        for part in &sources {
            fused.copy_rows_from(&mut encoder, part, row);
            row += part.rows();
        }
        gpu.queue().submit([encoder.finish()]);
        drop(sources);
        assert!(fused.chunks().len() > 1);
        let n = fused.rows();
        let (xb, yb, t) = (gpu.storage_from("x", &x), gpu.storage("y", (m * n * 4) as u64), tokens(&gpu, m));
        let io = ops::LinearBuffers::whole(&t, &xb, None, &yb, n);
        let op = ops::Linear::new(&gpu, &fused, io, ops::Store::Overwrite);
        run(&gpu, |p| op.encode(p, m as u32));
        let want = reference::linear(&x, &whole, None, k);
        assert_close(&read(&gpu, &yb, m * n), &want, 1e-4, 1e-4, &format!("fused {}", format.name()));
    }
}

#[test]
fn linear_with_a_folded_norm_or_swiglu_equals_the_operation_then_linear() {
    let gpu = family_gpu(KernelFamily::Tiled, None);
    // (M, K, N): decode and short prefills of 0.5B's and 1.5B's QKV, gate and down shapes, odd
    // N, 8 + 8 + 1 token rows, quantized blocks (Q4_K and Q6_K: K of whole super-blocks).
    let cases: [(usize, usize, usize); 6] =
        [(1, 896, 1152), (3, 1536, 2048), (17, 64, 33), (32, 896, 4864), (5, 512, 129), (1, 4864, 896)];
    for (i, &(m, k, n)) in cases.iter().enumerate() {
        for format in formats_for(k, m * k * n > 5_000_000) {
            let seed = 100 + (i * 10) as u64;
            // A residual stream of uneven scale and a norm weight around 1, as in a trained model;
            // gate values spread over silu's curve.
            let x: Vec<f32> =
                seeded(seed, m * k, 1.0).iter().enumerate().map(|(j, v)| v * (1 + j % 7) as f32).collect();
            let g: Vec<f32> = seeded(seed + 1, k, 0.5).iter().map(|v| 1.0 + v).collect();
            let up = seeded(seed + 4, m * k, 1.0);
            let w = format.round(&seeded(seed + 2, n * k, 0.1), k);
            let b = seeded(seed + 3, n, 0.5);
            let eps = 1e-6;
            let normed: Vec<f32> = x.chunks(k).flat_map(|row| reference::rms_norm(row, &g, eps)).collect();
            let swiglu: Vec<f32> = x.iter().zip(&up).map(|(v, u)| reference::silu(*v) * u).collect();
            let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), format, &w).unwrap();
            let (xb, bb) = (gpu.storage_from("x", &x), gpu.storage_from("b", &b));
            let (gb, ub) = (gpu.storage_from("g", &g), gpu.storage_from("up", &up));
            let folds = [
                ("norm", ops::Fold::Norm { weight: &gb, eps }, reference::linear(&normed, &w, Some(&b), k)),
                ("swiglu", ops::Fold::Glu { up: &ub }, reference::linear(&swiglu, &w, Some(&b), k)),
            ];
            for (name, fold, want) in folds {
                let (yb, t) = (gpu.storage("y", (m * n * 4) as u64), tokens(&gpu, m));
                let io = ops::LinearBuffers::whole(&t, &xb, Some(&bb), &yb, n);
                let op = ops::Linear::folded(&gpu, &wm, io, ops::Store::Overwrite, fold).expect("K % 8 == 0");
                run(&gpu, |p| op.encode(p, m as u32));
                let what = format!("{name} + linear M={m} K={k} N={n} {}", format.name());
                assert_close(&read(&gpu, &yb, m * n), &want, 1e-4, 1e-4, &what);
            }
        }
    }
    // Where matvec cannot run the layer, there is nothing to fold into.
    let (m, k, n) = (2, 70, 9);
    for (gpu, k) in [(family_gpu(KernelFamily::Direct, None), 64), (family_gpu(KernelFamily::Tiled, None), k)] {
        let wm = PackedMatrix::from_f32(&gpu, "w", (n, k), BF16, &seeded(1, n * k, 0.1)).unwrap();
        let (xb, yb, t) = (gpu.storage("x", (m * k * 4) as u64), gpu.storage("y", (m * n * 4) as u64), tokens(&gpu, m));
        let io = ops::LinearBuffers::whole(&t, &xb, None, &yb, n);
        let fold = ops::Fold::Norm { weight: &xb, eps: 1e-6 };
        assert!(ops::Linear::folded(&gpu, &wm, io, ops::Store::Overwrite, fold).is_none(), "K={k}");
    }
}

#[test]
fn gate_and_up_rows_paired_write_their_swiglu() {
    let gpu = family_gpu(KernelFamily::Tiled, None);
    // (M, K, I): matvec (M <= 32) and matmul in 32 x 32 tiles (M 33 and 40) and 64 x 64 ones
    // (M 200 over 4,200 rows), at 0.5B's and 1.5B's sizes, odd I (outputs past the last whole
    // workgroup), K not a multiple of 8 (matmul at any M), 8 + 8 + 1 token rows, whole blocks.
    let cases: [(usize, usize, usize); 9] = [
        (1, 896, 4864),
        (33, 896, 4864),
        (3, 1536, 8960),
        (17, 64, 33),
        (40, 64, 33),
        (5, 70, 37),
        (200, 70, 2100),
        (32, 512, 129),
        (2, 256, 5),
    ];
    for (i, &(m, k, inter)) in cases.iter().enumerate() {
        for format in formats_for(k, m * k * inter > 2_000_000) {
            let seed = 200 + (i * 10) as u64;
            let x: Vec<f32> =
                seeded(seed, m * k, 1.0).iter().enumerate().map(|(j, v)| v * (1 + j % 5) as f32).collect();
            let norm_weight: Vec<f32> = seeded(seed + 1, k, 0.5).iter().map(|v| 1.0 + v).collect();
            // gate_proj's rows then up_proj's, as GpuWeights pairs them; biases alike.
            let w = format.round(&seeded(seed + 2, 2 * inter * k, 0.1), k);
            let b = seeded(seed + 3, 2 * inter, 0.5);
            let eps = 1e-6;
            let normed: Vec<f32> = x.chunks(k).flat_map(|row| reference::rms_norm(row, &norm_weight, eps)).collect();
            let wm = PackedMatrix::from_f32(&gpu, "gate_up", (2 * inter, k), format, &w).unwrap();
            assert!(ops::Linear::pairs_rows(&gpu, &wm));
            let (xb, bb, gb) =
                (gpu.storage_from("x", &x), gpu.storage_from("b", &b), gpu.storage_from("g", &norm_weight));
            let fold = ops::Fold::Norm { weight: &gb, eps };
            for (folded, bias) in [(false, false), (false, true), (true, true)] {
                let input = if folded { &normed } else { &x };
                let (wg, wu) = w.split_at(inter * k);
                let (bg, bu) = b.split_at(inter);
                let gate = reference::linear(input, wg, bias.then_some(bg), k);
                let up = reference::linear(input, wu, bias.then_some(bu), k);
                let want: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| reference::silu(*g) * u).collect();
                let (yb, t) = (gpu.storage("y", (m * inter * 4) as u64), tokens(&gpu, m));
                let bias = bias.then_some(&bb);
                let io = ops::LinearBuffers::whole(&t, &xb, bias, &yb, inter);
                let what = format!("paired M={m} K={k} I={inter} {} folded={folded}", format.name());
                let Some(op) = ops::Linear::swiglu(&gpu, &wm, io, folded.then_some(fold)) else {
                    assert!(folded && !k.is_multiple_of(8), "{what}: only matvec folds, at K % 8 == 0");
                    continue;
                };
                run(&gpu, |p| op.encode(p, m as u32));
                assert_close(&read(&gpu, &yb, m * inter), &want, 1e-4, 1e-4, &what);
            }
        }
    }
    // Rows a workgroup cannot pair: CPU-like devices, and a matrix split over bindings.
    let w = seeded(1, 2 * 33 * 64, 0.1);
    for gpu in [family_gpu(KernelFamily::Direct, None), family_gpu(KernelFamily::Tiled, Some(4096))] {
        let wm = PackedMatrix::from_f32(&gpu, "gate_up", (66, 64), BF16, &w).unwrap();
        let (xb, yb, t) = (gpu.storage("x", 4 * 64), gpu.storage("y", 4 * 33), tokens(&gpu, 1));
        let io = ops::LinearBuffers::whole(&t, &xb, None, &yb, 33);
        assert!(!ops::Linear::pairs_rows(&gpu, &wm) && ops::Linear::swiglu(&gpu, &wm, io, None).is_none());
    }
}

#[test]
fn embedding_gathers_rows_across_chunks() {
    let cases = [
        (1000, 896, None, BF16),
        (517, 70, Some(1024u64), BF16),
        (151_936, 64, None, BF16),
        (1000, 896, None, WeightFormat::Quant(Quant::Q8_0)),
        (517, 96, Some(1024), WeightFormat::Quant(Quant::Q4_0)),
        (517, 160, Some(1024), WeightFormat::Quant(Quant::Q5_0)),
        (517, 512, Some(4096), WeightFormat::Quant(Quant::Q4_K)),
        (517, 512, Some(4096), WeightFormat::Quant(Quant::Q6_K)),
    ];
    for (vocab, h, limit, format) in cases {
        let gpu = match limit {
            Some(l) => small_binding_gpu(l),
            None => gpu(),
        };
        let table = format.round(&seeded(5, vocab * h, 1.0), h);
        let tm = PackedMatrix::from_f32(&gpu, "embed", (vocab, h), format, &table).unwrap();
        if limit.is_some() {
            assert!(tm.chunks().len() > 10, "{} chunks", tm.chunks().len());
        }
        let ids: Vec<u32> = vec![0, (vocab - 1) as u32, 7, 7, (vocab / 2) as u32];
        let (idb, out) = (u32s(&gpu, "ids", &ids), gpu.storage("out", (ids.len() * h * 4) as u64));
        let op = ops::Embedding::new(&gpu, &idb, &tm, &out);
        run(&gpu, |p| op.encode(p, ids.len() as u32));
        let want: Vec<f32> = ids.iter().flat_map(|&i| table[i as usize * h..][..h].to_vec()).collect();
        assert_close(
            &read(&gpu, &out, ids.len() * h),
            &want,
            0.0,
            0.0,
            &format!("embedding {vocab}x{h} {}", format.name()),
        );
    }
}

/// Both kernels: a workgroup per row (GPUs, and CPU-like devices where the hidden size is no
/// whole number of vec4s: 70 here) and a row per invocation (CPU-like devices otherwise).
#[test]
fn rms_norm_matches_reference() {
    for family in FAMILIES {
        let gpu = family_gpu(family, None);
        for (rows, h) in [(1, 70), (3, 896), (5, 1536), (2, 1000), (130, 64)] {
            let x = seeded(7, rows * h, 3.0);
            let w = seeded(8, h, 1.0);
            let want = reference::rms_norm(&x, &w, 1e-6);
            let (xb, wb, out) =
                (gpu.storage_from("x", &x), gpu.storage_from("w", &w), gpu.storage("o", (rows * h * 4) as u64));
            let op = ops::RmsNorm::new(&gpu, &xb, &wb, &out, h, 1e-6);
            run(&gpu, |p| op.encode(p, rows as u32));
            let what = format!("{family:?} rms_norm {rows}x{h}");
            assert_close(&read(&gpu, &out, rows * h), &want, 1e-5, 1e-5, &what);
        }
    }
}

/// (cache row base, position) per token: two sequences, the second starting at row 100.
fn meta(positions: &[(u32, u32)]) -> Vec<u32> {
    positions.iter().flat_map(|&(b, p)| [b, p]).collect()
}

/// Row-major matrices of `rows` rows placed side by side (each given with its width): one
/// [rows, sum of widths] matrix, as the Q, K and V projections fill `qkv`.
fn side_by_side(parts: &[(&[f32], usize)], rows: usize) -> Vec<f32> {
    (0..rows).flat_map(|r| parts.iter().flat_map(move |&(m, w)| m[r * w..][..w].to_vec())).collect()
}

/// The keys with RoPE applied at each token's position (CPU reference).
fn roped(x: &[f32], width: usize, d: usize, positions: &[u32]) -> Vec<f32> {
    let mut out = Vec::new();
    for (row, &p) in x.chunks_exact(width).zip(positions) {
        let mut row = row.to_vec();
        reference::rope(&mut row, width, d, p as usize, 1e6);
        out.extend(row);
    }
    out
}

#[test]
fn kv_write_applies_rope_to_keys_at_any_position() {
    let gpu = gpu();
    // Key widths of Qwen2.5-0.5B (2 x 64) and 1.5B (2 x 128), and odd ones.
    for (kv_heads, d) in [(2, 64), (2, 128), (3, 6), (1, 16)] {
        let positions = [0u32, 1, 5, 1000, 31_999];
        let kv_dim = kv_heads * d;
        let rows = 32_000;
        let (k, v) = (seeded(9, positions.len() * kv_dim, 1.0), seeded(10, positions.len() * kv_dim, 1.0));
        let m = meta(&positions.map(|p| (0, p)));
        // Keys and values after 5 other columns, as in a row of qkv.
        let other = seeded(8, positions.len() * 5, 1.0);
        let qkv = side_by_side(&[(&other, 5), (&k, kv_dim), (&v, kv_dim)], positions.len());
        let (mb, qkvb) = (u32s(&gpu, "meta", &m), gpu.storage_from("qkv", &qkv));
        let (kcb, vcb) = (gpu.storage("kc", (rows * kv_dim * 4) as u64), gpu.storage("vc", (rows * kv_dim * 4) as u64));
        let freq = gpu.storage_from("inv_freq", &onetoken::config::rope_inv_freq(d, 1e6));
        let new = ops::NewKeysValues { qkv: &qkvb, stride: 5 + 2 * kv_dim, k_col: 5 };
        let op = ops::KvWrite::new(&gpu, &mb, &freq, new, (&kcb, &vcb), (kv_dim, d));
        run(&gpu, |p| op.encode(p, positions.len() as u32));
        let (kc, vc) = (read(&gpu, &kcb, rows * kv_dim), read(&gpu, &vcb, rows * kv_dim));
        let at = |cache: &[f32]| -> Vec<f32> {
            positions.iter().flat_map(|&p| cache[p as usize * kv_dim..][..kv_dim].to_vec()).collect()
        };
        let what = format!("kv_write rope {kv_heads}x{d}");
        assert_close(&at(&kc), &roped(&k, kv_dim, d, &positions), 1e-5, 1e-5, &what);
        assert_close(&at(&vc), &v, 0.0, 0.0, "kv_write values");
    }
}

/// A shared prefix copied into another slot, every value exactly: 70,000 rows (a grid with a
/// workgroup row per cache row would pass the 65,535 one dimension allows), 0.5B's width with a
/// ragged last workgroup, and an odd width.
#[test]
fn kv_copy_copies_prefixes_longer_than_a_grid_dimension() {
    let gpu = gpu();
    for (rows, kv_dim) in [(70_000, 4), (37, 2 * 64), (5, 6)] {
        let capacity = rows + 3;
        let (k, v) = (seeded(20, 2 * capacity * kv_dim, 1.0), seeded(21, 2 * capacity * kv_dim, 1.0));
        let (kb, vb) = (gpu.storage_from("k", &k), gpu.storage_from("v", &v));
        let shape = ops::KvCopyShape { src: 0, dst: capacity as u32, rows: rows as u32, kv_dim: kv_dim as u32 };
        run(&gpu, |p| ops::kv_copy(&gpu, p, (&kb, &vb), shape));
        gpu.check().unwrap();
        for (name, before, buffer) in [("keys", &k, &kb), ("values", &v, &vb)] {
            let after = read(&gpu, buffer, before.len());
            let (src, dst) = (capacity * kv_dim, capacity * kv_dim + rows * kv_dim);
            assert_eq!(after[..src], before[..src], "{name}: the source slot is unchanged ({rows} rows)");
            assert_eq!(after[src..dst], before[..rows * kv_dim], "{name}: the copied rows ({rows} x {kv_dim})");
            assert_eq!(after[dst..], before[dst..], "{name}: the rows past the prefix are untouched");
        }
    }
}

#[test]
fn kv_write_and_attention_match_reference_for_a_ragged_batch_and_a_decode_step() {
    let gpu = gpu();
    // (heads, kv_heads, head_dim): tiny, Qwen2.5-0.5B, Qwen2.5-1.5B, an odd one, the largest;
    // the largest group the grouped kernel takes (8 x 128: all four of a thread's output
    // quads), and a group too large for it.
    let shapes = [(4, 2, 16), (14, 2, 64), (12, 2, 128), (3, 1, 6), (2, 1, 256), (8, 1, 128), (16, 1, 64)];
    for (heads, kv_heads, d) in shapes {
        let config = onetoken::Qwen2Config {
            hidden_size: heads * d,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            ..onetoken::Qwen2Config::qwen2_5_0_5b()
        };
        let kv_dim = kv_heads * d;
        // Sequence A: 300 cached + 3 new tokens at rows 0..; sequence B: 2 new tokens at 400..
        // (300 > the shader's 256-key block, so the online softmax crosses blocks). Then a
        // decode step of both and two more: one new token each, A's at 303 (the middle of a
        // 64-key chunk of the split attention), B's at 64 (the first of one; rows 2..64 as
        // cached), C's at 255 and D's at 256 (the last of the whole kernel's first 256-key block,
        // and alone in its second), E's at 4,199 (66 chunks: more than the combine pass has
        // threads).
        let (b_base, c_base, d_base, e_base) = (400u32, 500u32, 800u32, 1100u32);
        let rows = e_base as usize + 4200;
        let (k_cache, v_cache) = (seeded(11, rows * kv_dim, 1.0), seeded(12, rows * kv_dim, 1.0));
        let batches: [&[(u32, u32)]; 2] = [
            &[(0, 300), (0, 301), (0, 302), (b_base, 0), (b_base, 1)],
            &[(0, 303), (b_base, 64), (c_base, 255), (d_base, 256), (e_base, 4199)],
        ];
        let (kcb, vcb) = (gpu.storage_from("kc", &k_cache), gpu.storage_from("vc", &v_cache));
        let (mut kc, mut vc) = (k_cache.clone(), v_cache.clone());
        let w = heads * d;
        let stride = w + 2 * kv_dim;
        let freq = gpu.storage_from("inv_freq", &onetoken::config::rope_inv_freq(d, 1e6));
        let dims = ops::AttentionDims { heads, kv_heads, head_dim: d, capacity: rows };
        let partial = gpu.storage("partial", dims.partial_bytes());
        for (b, new) in batches.iter().enumerate() {
            let m = new.len();
            let seed = 13 + 3 * b as u64;
            let (q, k_new, v_new) =
                (seeded(seed, m * w, 1.0), seeded(seed + 1, m * kv_dim, 1.0), seeded(seed + 2, m * kv_dim, 1.0));
            // CPU: RoPE on the new queries and keys, write the new rows, then attend per token.
            // (The GPU takes q and k before RoPE and applies it as it reads them.)
            let positions: Vec<u32> = new.iter().map(|&(_, p)| p).collect();
            let before = (kc.clone(), vc.clone());
            let (q_roped, k_roped) = (roped(&q, w, d, &positions), roped(&k_new, kv_dim, d, &positions));
            for (t, &(base, pos)) in new.iter().enumerate() {
                let row = (base + pos) as usize;
                kc[row * kv_dim..][..kv_dim].copy_from_slice(&k_roped[t * kv_dim..][..kv_dim]);
                vc[row * kv_dim..][..kv_dim].copy_from_slice(&v_new[t * kv_dim..][..kv_dim]);
            }
            let mut want = Vec::new();
            for (t, &(base, pos)) in new.iter().enumerate() {
                let keys = base as usize * kv_dim..(base + pos + 1) as usize * kv_dim;
                let (kr, vr) = (&kc[keys.clone()], &vc[keys]);
                want.extend(reference::attention(&q_roped[t * w..][..w], kr, vr, &config, pos as usize));
            }
            let mb = u32s(&gpu, "meta", &meta(new));
            // Queries, keys and values side by side, as the QKV projection writes them.
            let qkvb = gpu.storage_from("qkv", &side_by_side(&[(&q, w), (&k_new, kv_dim), (&v_new, kv_dim)], m));
            let out = gpu.storage("out", (m * w * 4) as u64);
            let io = ops::AttentionBuffers {
                token_meta: &mb,
                q: &qkvb,
                q_stride: stride,
                k_cache: &kcb,
                v_cache: &vcb,
                out: &out,
                partial: &partial,
                inv_freq: &freq,
            };
            let attn = ops::Attention::new(&gpu, io, dims).unwrap();
            // Every path on the same batch: split keys, one workgroup per (head, token) (in a
            // decode step both append the new rows themselves), one per (KV head, token) for all
            // its query heads (where D % 16 == 0 and the group is at most 8 heads of 1,024 values
            // in all: not 3:1x6 or 16:1x64, which run whole instead), one invocation per (head,
            // token). Each starts from the cache as it was before the batch.
            let decode_step = b == 1;
            let longest = new.iter().map(|&(_, p)| p + 1).max().unwrap();
            // Past their loop budgets (E's 4,200 keys: direct at D >= 128) grouped and direct
            // give way to the whole kernel on loop-limited devices (see the next test).
            let whole_unless = |takes: bool, kernel| if takes || !attn.loop_limited() { kernel } else { "attention" };
            let paths = [
                (ops::AttentionPath::Split, "attention_split"),
                (ops::AttentionPath::Whole, "attention"),
                (ops::AttentionPath::Grouped, whole_unless(dims.grouped_takes(longest), "attention_grouped")),
                (ops::AttentionPath::Direct, whole_unless(dims.direct_takes(longest), "attention_direct")),
            ];
            for (path, kernel) in paths {
                let keys = ops::AttendedKeys { longest, pairs: 0, rows: 0, decode_step };
                let mut listing = Vec::new();
                attn.encode_path(&mut Dispatcher::listing(&mut listing), m as u32, keys, path);
                let names: Vec<&str> = listing.iter().map(|l| l.kernel).collect();
                assert!(names.contains(&kernel), "{path:?} {heads}:{kv_heads}x{d}: {names:?}");
                gpu.queue().write_buffer(&kcb, 0, bytemuck::cast_slice(&before.0));
                gpu.queue().write_buffer(&vcb, 0, bytemuck::cast_slice(&before.1));
                // NaN where the path writes nothing, not the previous path's output.
                gpu.queue().write_buffer(&out, 0, bytemuck::cast_slice(&vec![f32::NAN; m * w]));
                run(&gpu, |p| attn.encode_path(p, m as u32, keys, path));
                let what = format!("{path:?} {heads}:{kv_heads}x{d} decode_step={decode_step}");
                assert_close(
                    &read(&gpu, &kcb, rows * kv_dim),
                    &kc,
                    1e-5,
                    1e-5,
                    &format!("keys (RoPE applied), {what}"),
                );
                assert_close(&read(&gpu, &vcb, rows * kv_dim), &vc, 0.0, 0.0, &format!("values, {what}"));
                assert_close(&read(&gpu, &out, m * w), &want, 1e-5, 1e-4, &format!("attention {what}"));
            }
        }
    }
}

#[test]
fn direct_and_grouped_attention_are_exact_at_the_longest_context_they_take() {
    // lavapipe ends an invocation's loops after 65,535 iterations in all, silently: a kernel
    // whose threads walk every key returned a softmax cut short past about 2,000 keys of D = 64
    // (about 1,000 of D = 128). So each such path takes a context only within its loop budget
    // (AttentionDims::direct_takes, grouped_takes) and gives way to the whole kernel past it.
    // One token at the longest context each path takes, and at one key more: both exact.
    let gpu = gpu();
    for (heads, kv_heads, d) in [(14, 2, 64), (12, 2, 128), (3, 1, 6)] {
        let config = onetoken::Qwen2Config {
            hidden_size: heads * d,
            num_attention_heads: heads,
            num_key_value_heads: kv_heads,
            ..onetoken::Qwen2Config::qwen2_5_0_5b()
        };
        let sized = |capacity| ops::AttentionDims { heads, kv_heads, head_dim: d, capacity };
        let longest_taken = |takes: &dyn Fn(u32) -> bool| (1..).take_while(|&k| takes(k)).last().unwrap_or(0);
        let direct = longest_taken(&|k| sized(0).direct_takes(k));
        let grouped = longest_taken(&|k| sized(0).grouped_takes(k));
        let cases = [
            (ops::AttentionPath::Direct, "attention_direct", direct),
            (ops::AttentionPath::Grouped, "attention_grouped", grouped),
        ];
        for (path, kernel, taken) in cases.into_iter().filter(|c| c.2 > 0) {
            assert!(taken >= 1024, "{path:?} {heads}:{kv_heads}x{d} takes only {taken} keys");
            let (kv_dim, w) = (kv_heads * d, heads * d);
            let rows = taken as usize + 1;
            let dims = sized(rows);
            let (k_cache, v_cache) = (seeded(31, rows * kv_dim, 1.0), seeded(32, rows * kv_dim, 1.0));
            let (q, k_new, v_new) = (seeded(33, w, 1.0), seeded(34, kv_dim, 1.0), seeded(35, kv_dim, 1.0));
            let qkvb = gpu.storage_from("qkv", &side_by_side(&[(&q, w), (&k_new, kv_dim), (&v_new, kv_dim)], 1));
            let (kcb, vcb) = (gpu.storage_from("kc", &k_cache), gpu.storage_from("vc", &v_cache));
            let freq = gpu.storage_from("inv_freq", &onetoken::config::rope_inv_freq(d, 1e6));
            let (out, partial) = (gpu.storage("out", (w * 4) as u64), gpu.storage("partial", dims.partial_bytes()));
            for (keys, past) in [(taken, false), (taken + 1, true)] {
                gpu.queue().write_buffer(&kcb, 0, bytemuck::cast_slice(&k_cache));
                gpu.queue().write_buffer(&vcb, 0, bytemuck::cast_slice(&v_cache));
                let pos = keys - 1;
                // CPU: the new row (its key with RoPE) joins the cache, then the token attends.
                let (mut kc, mut vc) = (k_cache.clone(), v_cache.clone());
                let row = pos as usize * kv_dim;
                kc[row..][..kv_dim].copy_from_slice(&roped(&k_new, kv_dim, d, &[pos]));
                vc[row..][..kv_dim].copy_from_slice(&v_new);
                let end = keys as usize * kv_dim;
                let want =
                    reference::attention(&roped(&q, w, d, &[pos]), &kc[..end], &vc[..end], &config, pos as usize);
                let mb = u32s(&gpu, "meta", &meta(&[(0, pos)]));
                let io = ops::AttentionBuffers {
                    token_meta: &mb,
                    q: &qkvb,
                    q_stride: w + 2 * kv_dim,
                    k_cache: &kcb,
                    v_cache: &vcb,
                    out: &out,
                    partial: &partial,
                    inv_freq: &freq,
                };
                let attn = ops::Attention::new(&gpu, io, dims).unwrap();
                let want_kernel = if past && attn.loop_limited() { "attention" } else { kernel };
                let keys_seen = ops::AttendedKeys { longest: keys, pairs: 0, rows: 0, decode_step: false };
                let mut listing = Vec::new();
                attn.encode_path(&mut Dispatcher::listing(&mut listing), 1, keys_seen, path);
                let names: Vec<&str> = listing.iter().map(|l| l.kernel).collect();
                let what = format!("{path:?} {heads}:{kv_heads}x{d} over {keys} keys");
                assert!(names.contains(&want_kernel), "{what}: {names:?}");
                run(&gpu, |p| attn.encode_path(p, 1, keys_seen, path));
                assert_close(&read(&gpu, &out, w), &want, 1e-5, 1e-4, &what);
            }
        }
    }
}

#[test]
fn silu_mul_gather_and_top_k_match_reference() {
    let gpu = gpu();
    for (m, cols) in [(1, 7), (3, 4864), (2, 8960)] {
        let mut gate = seeded(20, m * cols, 6.0);
        // Gates far out on both sides: silu is 0 and the gate itself (exp past its f32 range).
        (gate[0], gate[m * cols - 1]) = (-200.0, 200.0);
        let up = seeded(21, m * cols, 2.0);
        let want: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| reference::silu(*g) * u).collect();
        let (gb, ub) = (gpu.storage_from("g", &gate), gpu.storage_from("u", &up));
        let op = ops::SiluMul::new(&gpu, &gb, &ub, cols);
        run(&gpu, |p| op.encode(p, m as u32));
        assert_close(&read(&gpu, &gb, m * cols), &want, 1e-6, 1e-5, &format!("silu_mul {m}x{cols}"));
    }

    let (m, h) = (9, 70);
    let x = seeded(22, m * h, 1.0);
    let which = [8u32, 0, 3];
    let (wb, xb, out) = (u32s(&gpu, "which", &which), gpu.storage_from("x", &x), gpu.storage("o", (3 * h * 4) as u64));
    let op = ops::GatherRows::new(&gpu, &wb, &xb, &out, h);
    run(&gpu, |p| op.encode(p, 3));
    let want: Vec<f32> = which.iter().flat_map(|&r| x[r as usize * h..][..h].to_vec()).collect();
    assert_close(&read(&gpu, &out, 3 * h), &want, 0.0, 0.0, "gather_rows");

    // On GPUs one chunk of the first pass (1,024 logits), three (the last of one logit: fewer
    // than k), five, and Qwen2.5's vocabulary (149); on CPU-like devices (4,096 a chunk) one,
    // two (the last of one logit) and 38.
    let vocabs = [5usize, 1000, 2049, 4097, 151_936];
    for (family, vocab) in FAMILIES.into_iter().flat_map(|f| vocabs.map(|v| (f, v))) {
        let gpu = family_gpu(family, None);
        let mut logits = seeded(23, 3 * vocab, 10.0);
        // Row 1: a tie between two ids (in different chunks, where there are several); the smaller
        // must win, as on the CPU.
        logits[vocab + vocab / 3] = 50.0;
        logits[vocab + vocab - 1] = 50.0;
        let k = if vocab > 100_000 { ops::TOP_K_MAX } else { 5.min(vocab) };
        // Row 2: all k best in the first chunk.
        for i in 0..k {
            logits[2 * vocab + i] = 60.0 + i as f32;
        }
        let stride = 1 + ops::TOP_K_MAX;
        let rows = gpu.uniform("rows", &[3u32, k as u32, 0, 0]);
        let (lb, out) = (gpu.storage_from("l", &logits), gpu.storage("out", (3 * stride * 8) as u64));
        let op = ops::TopK::new(&gpu, &rows, &lb, &out, vocab, 3);
        run(&gpu, |p| op.encode(p, 3, k));
        let got: Vec<u32> =
            bytemuck::pod_collect_to_vec(&pollster::block_on(gpu.download(&out, (3 * stride * 8) as u64)).unwrap());
        for r in 0..3 {
            let row = &logits[r * vocab..(r + 1) * vocab];
            let mut order: Vec<u32> = (0..vocab as u32).collect();
            order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
            let got_row = &got[r * stride * 2..];
            let top: Vec<(u32, f32)> =
                (0..k).map(|j| (got_row[2 + 2 * j], f32::from_bits(got_row[3 + 2 * j]))).collect();
            let want: Vec<(u32, f32)> = order[..k].iter().map(|&i| (i, row[i as usize])).collect();
            assert_eq!(top, want, "{family:?} top-{k} of row {r} of {vocab}");
            assert_eq!(top[0].0, onetoken::choice::argmax(row) as u32);
            let max = want[0].1;
            let lse = max + row.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
            assert_close(&[f32::from_bits(got_row[0])], &[lse], 1e-4, 1e-5, "logsumexp");
        }
    }
}

#[test]
fn lm_head_rows_compute_only_the_chosen_logits() {
    let q8 = WeightFormat::Quant(Quant::Q8_0);
    let q4 = WeightFormat::Quant(Quant::Q4_0);
    let q5 = WeightFormat::Quant(Quant::Q5_0);
    let (q4k, q6k) = (WeightFormat::Quant(Quant::Q4_K), WeightFormat::Quant(Quant::Q6_K));
    let cases = [
        (None, BF16),
        (Some(2048u64), BF16),
        (None, q8),
        (Some(2048), q4),
        (Some(4096), q5),
        (Some(8192), q4k),
        (None, q6k),
    ];
    for (limit, format) in cases {
        let gpu = match limit {
            Some(l) => small_binding_gpu(l),
            None => gpu(),
        };
        // K-quant rows are whole super-blocks of 256.
        let (vocab, h, rows) = (1001, if format == q4k || format == q6k { 1024 } else { 896 }, 3);
        let head = format.round(&seeded(30, vocab * h, 0.1), h);
        let hm = PackedMatrix::from_f32(&gpu, "head", (vocab, h), format, &head).unwrap();
        let x = seeded(31, rows * h, 1.0);
        let ids = [1000u32, 0, 517, 3, 999];
        let all = reference::linear(&x, &head, None, h);
        let want: Vec<f32> =
            (0..rows).flat_map(|r| ids.iter().map(|&i| all[r * vocab + i as usize]).collect::<Vec<_>>()).collect();
        let (ib, xb, out) =
            (u32s(&gpu, "ids", &ids), gpu.storage_from("x", &x), gpu.storage("o", (rows * 5 * 4) as u64));
        let op = ops::LmHeadRows::new(&gpu, &ib, &xb, &hm, &out);
        run(&gpu, |p| op.encode(p, ids.len() as u32, rows as u32));
        assert_close(
            &read(&gpu, &out, rows * 5),
            &want,
            1e-4,
            1e-4,
            &format!("lm_head_rows, limit {limit:?}, {}", format.name()),
        );
    }
}

#[test]
fn device_errors_are_returned_not_panicked() {
    let gpu = gpu();
    gpu.check().unwrap();
    // Bigger than any buffer may be: wgpu rejects it; the engine reports it at the next check.
    let _huge = gpu.storage("huge", gpu.limits().max_buffer_size + 4096);
    let err = gpu.check().unwrap_err().to_string();
    assert!(err.starts_with("GPU: "), "{err}");
    assert!(err.to_lowercase().contains("huge") || err.contains("size"), "{err}");
    gpu.check().unwrap();
    // Settling waits for the GPU and reports what the device raised meanwhile (the browser's
    // load awaits it): an error made before, then nothing once it has been reported.
    let _huge = gpu.storage("huge", gpu.limits().max_buffer_size + 4096);
    let err = pollster::block_on(gpu.settle()).unwrap_err().to_string();
    assert!(err.starts_with("GPU: "), "{err}");
    pollster::block_on(gpu.settle()).unwrap();
    gpu.device().destroy();
    let err = pollster::block_on(gpu.settle()).unwrap_err().to_string();
    assert!(err.contains("lost"), "{err}");
}

#[test]
fn an_error_reported_during_a_readback_leaves_its_buffer_usable() {
    let gpu = gpu();
    let words = [1u32, 2, 3, 4];
    let (source, staging) = (gpu.storage_from("source", &words), gpu.staging("staging", 16));
    let copy = || {
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&source, 0, &staging, 0, 16);
        gpu.queue().submit([encoder.finish()]);
    };
    copy();
    // An error the device raises while the copy is read back (in the browser: a late
    // out-of-memory report) fails the read, after the buffer was mapped.
    let _huge = gpu.storage("huge", gpu.limits().max_buffer_size + 4096);
    let err = pollster::block_on(onetoken::gpu::read_buffer(&gpu, &staging, 16)).unwrap_err().to_string();
    assert!(err.starts_with("GPU: "), "{err}");
    // The buffer was unmapped on the way out: the next copy into it and its read work.
    copy();
    let read = pollster::block_on(onetoken::gpu::read_buffer(&gpu, &staging, 16)).unwrap();
    assert_eq!(bytemuck::pod_collect_to_vec::<u8, u32>(&read), words);
}
