// Copies the rows that need logits (the last token of each sequence, usually) into a small
// buffer, so the final norm and the LM head run on R rows instead of all M tokens.
struct Shape {
    cols: u32,       // hidden
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> token_rows: array<u32>;   // [R]: token index of each read-out row
@group(0) @binding(2) var<storage, read> x: array<f32>;            // [M, hidden]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;    // [R, hidden]

// One thread per (row, column); the grid's y is exactly R.
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.y;
    let c = gid.x;
    if c >= shape.cols {
        return;
    }
    out[r * shape.cols + c] = x[token_rows[r] * shape.cols + c];
}
