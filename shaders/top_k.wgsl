// The full-vocabulary readout of a row without copying the row to the CPU:
// out[r, 0] = (logsumexp of logits[r, :] as f32 bits, 0), then out[r, 1 + j] = (id, logit bits)
// of the j-th largest logit, j < k (k = 1 is greedy argmax). Ties go to the smaller id.
struct Shape {
    cols: u32,       // vocabulary
    stride: u32,     // entries per row of out: 1 + max k
    _pad0: u32,
    _pad1: u32,
}
struct Rows {
    rows: u32,       // R
    k: u32,          // how many of the largest to find
}
@group(0) @binding(0) var<uniform> rows: Rows;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) var<storage, read> logits: array<f32>;           // [R, vocab]
@group(0) @binding(3) var<storage, read_write> out: array<vec2<u32>>;  // [R, 1 + max k]

const WG: u32 = 256u;
var<workgroup> vals: array<f32, WG>;
var<workgroup> idxs: array<u32, WG>;
var<workgroup> sums: array<f32, WG>;

// (a, ia) ranks before (b, ib): larger value, then smaller id.
fn before(a: f32, ia: u32, b: f32, ib: u32) -> bool {
    return a > b || (a == b && ia < ib);
}

// One workgroup per row.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r = wg.x;
    let base = r * shape.cols;
    // Round 0 finds the maximum and, online, each thread's sum of exp(l - its max).
    // Round j > 0 finds the best entry ranked after the one found in round j - 1.
    var prev_v = 3.4e38;
    var prev_i = 0u;
    for (var j = 0u; j < rows.k; j++) {
        var v = -3.4e38;
        var id = 0xffffffffu;
        var m = -3.4e38;
        var s = 0.0;
        for (var c = tid; c < shape.cols; c += WG) {
            let l = logits[base + c];
            if j == 0u {
                let nm = max(m, l);
                s = s * exp(m - nm) + exp(l - nm);
                m = nm;
            }
            if before(prev_v, prev_i, l, c) && before(l, c, v, id) {
                v = l;
                id = c;
            }
        }
        vals[tid] = v;
        idxs[tid] = id;
        sums[tid] = s;
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
            if j == 0u {
                out[r * shape.stride] = vec2<u32>(bitcast<u32>(prev_v + log(sums[0])), 0u);
            }
            out[r * shape.stride + 1u + j] = vec2<u32>(prev_i, bitcast<u32>(prev_v));
        }
        workgroupBarrier();
    }
}
