// Copies rows within the KV cache: rows dst .. dst + n take rows src .. src + n, for keys and
// values (WebGPU forbids a buffer-to-buffer copy within one buffer). Used to start a sequence
// from another one's prefix.
struct Shape {
    src: u32,        // first source row
    dst: u32,        // first destination row
    rows: u32,       // n
    kv_dim: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read_write> k_cache: array<f32>;  // [slots * capacity, kv_dim]
@group(0) @binding(2) var<storage, read_write> v_cache: array<f32>;  // [slots * capacity, kv_dim]

// One thread per (row, column).
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= shape.kv_dim || gid.y >= shape.rows {
        return;
    }
    let src_at = (shape.src + gid.y) * shape.kv_dim + gid.x;
    let dst_at = (shape.dst + gid.y) * shape.kv_dim + gid.x;
    k_cache[dst_at] = k_cache[src_at];
    v_cache[dst_at] = v_cache[src_at];
}
