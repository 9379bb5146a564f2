// Appends the new tokens' keys and values to the KV cache (cache row = base + position), with
// RoPE applied to the keys on the way (rotary.wgsl).
struct Shape {
    kv_dim: u32,     // kv heads x head_dim
    head_dim: u32,   // D
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;     // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> k: array<f32>;              // [M, kv_dim], before RoPE
@group(0) @binding(3) var<storage, read> v: array<f32>;              // [M, kv_dim]
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;  // [slots * capacity, kv_dim]
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;  // [slots * capacity, kv_dim]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;       // [D / 2]

// One thread per (token, column); the grid's y is exactly M.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y;
    let c = gid.x;
    if c >= shape.kv_dim {
        return;
    }
    let d = shape.head_dim;
    let j = c % d;
    let first = t * shape.kv_dim;
    let key = rotary(k[first + c], k[first + c - j + rotary_partner(j, d)], j, d, token_meta[t].y);
    let row = token_meta[t].x + token_meta[t].y;
    k_cache[row * shape.kv_dim + c] = key;
    v_cache[row * shape.kv_dim + c] = v[first + c];
}
