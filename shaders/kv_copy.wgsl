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

// One thread per value of the n rows, counted flat over a 2-D grid of workgroups (x + y *
// num_workgroups.x): a prefix longer than 65,535 rows fits no one grid dimension.
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lane: u32,
) {
    let i = (wg.x + wg.y * groups.x) * WORKGROUP + lane;
    if i >= shape.rows * shape.kv_dim {
        return;
    }
    let row = i / shape.kv_dim;
    let col = i % shape.kv_dim;
    let src_at = (shape.src + row) * shape.kv_dim + col;
    let dst_at = (shape.dst + row) * shape.kv_dim + col;
    k_cache[dst_at] = k_cache[src_at];
    v_cache[dst_at] = v_cache[src_at];
}
