// Embedding gather over one row chunk of embed_tokens: out[t, :] = w[ids[t] - row_start, :]
// for the tokens whose id falls in this chunk (the embedding may be split across bindings).
struct Shape {
    cols: u32,       // hidden
    row_start: u32,  // first vocabulary row held by this chunk
    rows: u32,       // rows in this chunk
    _pad: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> ids: array<u32>;          // [M]
@group(0) @binding(2) var<storage, read> w: array<u32>;            // [rows, hidden] packed

// Word i of w, for weight_pairs.wgsl.
fn weight_word(i: u32) -> u32 {
    return w[i];
}
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>; // [M, hidden / 2]

// One thread per (token, value pair); the grid's y is exactly M.
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let pairs = shape.cols / 2u;
    let t = gid.y;
    let p = gid.x;
    if p >= pairs {
        return;
    }
    let id = ids[t];
    if id < shape.row_start || id >= shape.row_start + shape.rows {
        return;
    }
    out[t * pairs + p] = weight_pair(id - shape.row_start, p, shape.cols);
}
