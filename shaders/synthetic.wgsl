// Fills one row chunk of a synthetic weight matrix with deterministic bf16 values, so a model of
// the real Qwen2.5 shapes exists on the GPU with no download. Value i of a tensor is
// (2u - 1) * scale, u uniform in [0, 1) from an integer hash of (tensor seed, i), rounded to bf16
// (nearest even). The CPU computes the same bits (synthetic.rs, matrix_value), so the CPU reference
// can check a synthetic forward.
struct Shape {
    seed: u32,         // per-tensor seed
    first: u32,        // index of this chunk's first value in the whole tensor
    pairs: u32,        // value pairs in this chunk
    scale: f32,        // a power of two, so the product is exact
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;   // [pairs] packed bf16

fn hash(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn bf16_bits(i: u32) -> u32 {
    let u = f32(hash(i ^ shape.seed) >> 8u) * (1.0 / 16777216.0);
    let bits = bitcast<u32>((2.0 * u - 1.0) * shape.scale);
    return (bits + 0x7fffu + ((bits >> 16u) & 1u)) >> 16u;
}

// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let p = gid.x + gid.y * groups.x * WORKGROUP;
    if p >= shape.pairs {
        return;
    }
    let i = shape.first + 2u * p;
    w[p] = bf16_bits(i) | (bf16_bits(i + 1u) << 16u);
}
