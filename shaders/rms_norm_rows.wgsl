// RMSNorm (rms_norm.wgsl's) for CPU-like devices (lavapipe, SwiftShader): one invocation a row,
// 16 bytes a load, no workgroup memory and no barriers. A CPU runs a workgroup's invocations as
// the SIMD lanes of one thread and makes each barrier a switch between its batches of lanes:
// rms_norm.wgsl's 256 threads and 9 barriers per row cost SwiftShader 0.2-0.6 ms a row (a
// 96-token prefill of a 64-wide model spent 113 of its 150 ms in it), and one lane of work
// costs microseconds. Needs the hidden size to be a multiple of 4 (every Qwen2.5 size is).
// Shape is rms_norm.wgsl's.
struct Shape {
    cols: u32,   // hidden, a multiple of 4
    eps: f32,
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;          // [R, hidden / 4]
@group(0) @binding(2) var<storage, read> weight: array<vec4<f32>>;     // [hidden / 4]
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;  // [R, hidden / 4]

// One workgroup of one invocation per row (the grid says how many rows): no bounds to check.
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {
    let quads = shape.cols / 4u;
    let base = wg.x * quads;
    var squares = vec4<f32>(0.0);
    for (var q = 0u; q < quads; q++) {
        let v = x[base + q];
        squares += v * v;
    }
    let scale = inverseSqrt(dot(squares, vec4<f32>(1.0)) / f32(shape.cols) + shape.eps);
    for (var q = 0u; q < quads; q++) {
        out[base + q] = x[base + q] * scale * weight[q];
    }
}
