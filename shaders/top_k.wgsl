// The full-vocabulary readout of a row without copying the row to the CPU:
// out[r, 0] = (logsumexp of logits[r, :] as f32 bits, 0), then out[r, 1 + j] = (id, logit bits)
// of the j-th largest logit, j < k (k = 1 is greedy argmax). Ties go to the smaller id.
// In two passes, so that a decode step's one row spreads over the GPU: first one workgroup per
// CHUNK logits of a row finds that chunk's k best and its (maximum, sum of exp(l - maximum)),
// into `chunks`; then with MERGE one workgroup per row finds the k best of the chunks' bests and
// merges their sums. (One workgroup walking a row of 151,936 logits left all but one compute
// unit idle, 594 serial steps a thread.)
struct Shape {
    cols: u32,       // vocabulary
    stride: u32,     // entries per row of out and per chunk of `chunks`: 1 + max k
    _pad0: u32,
    _pad1: u32,
}
struct Rows {
    rows: u32,       // R
    k: u32,          // how many of the largest to find
}
@group(0) @binding(0) var<uniform> rows: Rows;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) var<storage, read> logits: array<f32>;              // [R, vocab]
@group(0) @binding(3) var<storage, read_write> chunks: array<vec2<u32>>;  // [R, chunks, stride]: like out, per chunk (the maximum's bits, the sum's bits), then its k best
@group(0) @binding(4) var<storage, read_write> out: array<vec2<u32>>;     // [R, stride]

override MERGE: bool = false;
override CHUNK: u32;  // logits per chunk (set by the Rust side)
override WG: u32;     // threads per workgroup, a power of two (set by the Rust side)
const NONE: u32 = 0xffffffffu;  // the id of no entry (a chunk with fewer than k logits)
var<workgroup> vals: array<f32, WG>;
var<workgroup> idxs: array<u32, WG>;
var<workgroup> sums: array<f32, WG>;

// (a, ia) ranks before (b, ib): larger value, then smaller id.
fn before(a: f32, ia: u32, b: f32, ib: u32) -> bool {
    return a > b || (a == b && ia < ib);
}

// A thread's best entry ranked after the previous round's, and its online (maximum, sum of
// exp(l - maximum)) of round 0.
struct Best {
    v: f32,
    id: u32,
    m: f32,
    s: f32,
}

// `b` with the entry (l, id) considered; with `stats`, l also joins the sum.
fn consider(b: Best, l: f32, id: u32, prev_v: f32, prev_i: u32, stats: bool) -> Best {
    var r = b;
    if stats {
        r = merge_sum(r, l, 1.0);
    }
    if before(prev_v, prev_i, l, id) && before(l, id, r.v, r.id) {
        r.v = l;
        r.id = id;
    }
    return r;
}

// `b`'s sum with s more, relative to maximum m.
fn merge_sum(b: Best, m: f32, s: f32) -> Best {
    var r = b;
    let nm = max(r.m, m);
    r.s = r.s * exp(r.m - nm) + s * exp(m - nm);
    r.m = nm;
    return r;
}

// Workgroup (chunk, row); with MERGE (0, row).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r = wg.y;
    let count = (shape.cols + CHUNK - 1u) / CHUNK;
    let first = r * count * shape.stride;  // this row's chunks
    // Round 0 finds the maximum and, online, each thread's sum of exp(l - its max) (MERGE: of
    // its chunks' sums). Round j > 0 finds the best entry ranked after round j - 1's. A
    // thread's round-0 best is its maximum: with MERGE it takes whole chunks, whose best is
    // their maximum.
    var prev_v = 3.4e38;
    var prev_i = 0u;
    for (var j = 0u; j < rows.k; j++) {
        var b = Best(-3.4e38, NONE, -3.4e38, 0.0);
        if MERGE {
            for (var c = tid; c < count; c += WG) {
                let at = first + c * shape.stride;
                if j == 0u {
                    b = merge_sum(b, bitcast<f32>(chunks[at].x), bitcast<f32>(chunks[at].y));
                }
                for (var i = 0u; i < rows.k; i++) {
                    let e = chunks[at + 1u + i];
                    b = consider(b, bitcast<f32>(e.y), e.x, prev_v, prev_i, false);
                }
            }
        } else {
            let start = wg.x * CHUNK;
            let end = min(start + CHUNK, shape.cols);
            for (var c = start + tid; c < end; c += WG) {
                b = consider(b, logits[r * shape.cols + c], c, prev_v, prev_i, j == 0u);
            }
        }
        vals[tid] = b.v;
        idxs[tid] = b.id;
        sums[tid] = b.s;
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
            if tid < stride {
                let ov = vals[tid + stride];
                let oi = idxs[tid + stride];
                if j == 0u {
                    // Merge (max, sum) pairs: both maxima are in vals before the swap below.
                    let mx = max(vals[tid], ov);
                    sums[tid] = sums[tid] * exp(vals[tid] - mx) + sums[tid + stride] * exp(ov - mx);
                }
                if before(ov, oi, vals[tid], idxs[tid]) {
                    vals[tid] = ov;
                    idxs[tid] = oi;
                }
            }
            workgroupBarrier();
        }
        prev_v = vals[0];
        prev_i = idxs[0];
        if tid == 0u {
            if MERGE {
                if j == 0u {
                    out[r * shape.stride] = vec2<u32>(bitcast<u32>(prev_v + log(sums[0])), 0u);
                }
                out[r * shape.stride + 1u + j] = vec2<u32>(prev_i, bitcast<u32>(prev_v));
            } else {
                let at = first + wg.x * shape.stride;
                if j == 0u {
                    chunks[at] = vec2<u32>(bitcast<u32>(prev_v), bitcast<u32>(sums[0]));
                }
                chunks[at + 1u + j] = vec2<u32>(prev_i, bitcast<u32>(prev_v));
            }
        }
        workgroupBarrier();
    }
}
