// Appends the new tokens' keys and values to the KV cache (cache row = base + position), with
// RoPE applied to the keys on the way (rotary.wgsl).
struct Shape {
    kv_dim: u32,     // kv heads x head_dim
    head_dim: u32,   // D
    stride: u32,     // row stride of qkv
    k_col: u32,      // first column of the keys in qkv; the values follow them
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;     // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> qkv: array<f32>;            // [M, stride]: keys (before RoPE), values
@group(0) @binding(3) var<storage, read_write> k_cache: array<f32>;  // [slots * capacity, kv_dim]
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;  // [slots * capacity, kv_dim]
@group(0) @binding(5) var<storage, read> inv_freq: array<f32>;       // [D / 2]

// One thread per (token, column); the grid's y is exactly M.
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y;
    let c = gid.x;
    if c >= shape.kv_dim {
        return;
    }
    let d = shape.head_dim;
    let j = c % d;
    let k = t * shape.stride + shape.k_col;  // this token's keys; its values at k + kv_dim
    let key = rotary(qkv[k + c], qkv[k + c - j + rotary_partner(j, d)], j, d, token_meta[t].y);
    let row = token_meta[t].x + token_meta[t].y;
    k_cache[row * shape.kv_dim + c] = key;
    v_cache[row * shape.kv_dim + c] = qkv[k + shape.kv_dim + c];
}
