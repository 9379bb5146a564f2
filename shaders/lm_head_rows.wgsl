// LM head over a given list of vocabulary rows only (the choices' tokens): for the ids that fall
// in this row chunk of the head, logits[r, c] = x[r, :] . w[ids[c] - row_start, :].
// Strategy B needs k logits, not the whole vocabulary.
struct Shape {
    cols: u32,       // hidden
    row_start: u32,  // first vocabulary row held by this chunk
    chunk_rows: u32, // rows in this chunk
    _pad: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> ids: array<u32>;           // [k]
@group(0) @binding(2) var<storage, read> x: array<vec2<f32>>;       // [R, hidden / 2]
@group(0) @binding(3) var<storage, read> w: array<u32>;             // [chunk_rows, hidden] packed

// Word i of w, for weight_pairs.wgsl.
fn weight_word(i: u32) -> u32 {
    return w[i];
}
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;  // [R, k]

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

// One workgroup per (id, row): the grid is exactly (k, R).
@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) grid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let c = wg.x;
    let r = wg.y;
    let id = ids[c];
    if id < shape.row_start || id >= shape.row_start + shape.chunk_rows {
        return;  // the whole workgroup leaves together: this id lives in another chunk
    }
    let pairs = shape.cols / 2u;
    let base = (id - shape.row_start) * row_words(shape.cols);
    var s = 0.0;
    for (var p = tid; p < pairs; p += WG) {
        s += dot(weight_pair_at(base, p, shape.cols), x[r * pairs + p]);
    }
    partial[tid] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if tid < stride {
            partial[tid] += partial[tid + stride];
        }
        workgroupBarrier();
    }
    if tid == 0u {
        logits[r * grid.x + c] = partial[0];
    }
}
