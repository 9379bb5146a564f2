// Arithmetic probe: each thread runs ITERS rounds of 8 independent fused multiply-adds on
// vec4s (64 flops per round), so the count of flops over the time taken is the device's f32
// FMA throughput, the ceiling of a compute-bound prefill.
struct Shape {
    iters: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // [threads]: keeps the work alive

override WORKGROUP: u32;  // threads per workgroup (set by the Rust side)

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let seed = f32(gid.x) * 1e-7;
    var a0 = vec4<f32>(seed);
    var a1 = a0 + 0.1;
    var a2 = a0 + 0.2;
    var a3 = a0 + 0.3;
    var a4 = a0 + 0.4;
    var a5 = a0 + 0.5;
    var a6 = a0 + 0.6;
    var a7 = a0 + 0.7;
    let m = vec4<f32>(0.999);
    let c = vec4<f32>(0.001);
    for (var i = 0u; i < shape.iters; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    let s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    out[gid.x] = s.x + s.y + s.z + s.w;
}
