// RMSNorm: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight.
struct Shape {
    cols: u32,   // hidden
    eps: f32,
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> x: array<f32>;            // [R, hidden]
@group(0) @binding(2) var<storage, read> weight: array<f32>;       // [hidden]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // [R, hidden]

const WG: u32 = 256u;
var<workgroup> partial: array<f32, WG>;

// One workgroup per row (the grid says how many rows).
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r = wg.x;
    let base = r * shape.cols;
    var sum = 0.0;
    for (var c = tid; c < shape.cols; c += WG) {
        let v = x[base + c];
        sum += v * v;
    }
    partial[tid] = sum;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if tid < stride {
            partial[tid] += partial[tid + stride];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(shape.cols) + shape.eps);
    for (var c = tid; c < shape.cols; c += WG) {
        out[base + c] = x[base + c] * scale * weight[c];
    }
}
