// Prefill linear layer (interface in linear.wgsl) for GPUs: x holds all tokens of all sequences.
// A workgroup computes a TILE x TILE block of y (TILE tokens x TILE weight rows) in steps of BK
// along K: both tiles go through workgroup memory, and each of its (TILE / 4)^2 threads keeps a
// 4 x 4 block of results in four named vec4 accumulators. (An indexed local array here was left
// in slow local memory by a real GPU's compiler: 18x slower.) TILE = 32 gives four times more
// workgroups than 64 and serves small batches, where 64 would leave most of a GPU idle.
@group(0) @binding(2) var<storage, read> x: array<vec2<f32>>;      // [M, K / 2]
@group(0) @binding(3) var<storage, read> w: array<u32>;            // [N, K] packed
fn weight_word(i: u32) -> u32 { return w[i]; }  // for weight_pairs.wgsl

override TILE: u32 = 64u;        // 32 or 64
const BK: u32 = 16u;             // K per step
const ROW: u32 = 5u;             // vec4s per tile row: BK / 4 + 1 of padding against bank conflicts
override THREADS: u32 = TILE * TILE / 16u;  // (TILE / 4)^2
// Tiles row-major, [TILE, BK] plus padding, read 4 k at a time.
var<workgroup> xs: array<vec4<f32>, TILE * ROW>;
var<workgroup> ws: array<vec4<f32>, TILE * ROW>;

// Thread (tx, ty) computes tokens m0 + ty + i * TILE / 4 and weight rows n0 + tx + j * TILE / 4
// (i, j < 4): neighbouring threads store neighbouring columns.
@compute @workgroup_size(TILE / 4u, TILE / 4u)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let m0 = wg.y * TILE;
    let n0 = wg.x * TILE;
    let k_pairs = shape.k / 2u;
    let step = TILE / 4u;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < k_pairs; k0 += BK / 2u) {
        // Both tiles: TILE rows x 4 vec4s; a thread reads 4 consecutive k of one row of each.
        for (var e = tid; e < TILE * BK / 4u; e += THREADS) {
            let row = e / (BK / 4u);
            let p = k0 + 2u * (e % (BK / 4u));
            let m = m0 + row;
            let n = n0 + row;
            var xv = vec4<f32>(0.0);
            var wv = vec4<f32>(0.0);
            // K is even but not always a multiple of 4: the last vec4 may hold one pair.
            let both = p + 1u < k_pairs;
            if m < tokens.m && p < k_pairs {
                let at = m * k_pairs + p;
                xv = vec4<f32>(x[at], 0.0, 0.0);
                if both {
                    xv = vec4<f32>(xv.xy, x[at + 1u]);
                }
            }
            if n < shape.n && p < k_pairs {
                let base = n * row_words(shape.k);
                wv = vec4<f32>(weight_pair_at(base, p, shape.k), 0.0, 0.0);
                if both {
                    wv = vec4<f32>(wv.xy, weight_pair_at(base, p + 1u, shape.k));
                }
            }
            xs[row * ROW + e % (BK / 4u)] = xv;
            ws[row * ROW + e % (BK / 4u)] = wv;
        }
        workgroupBarrier();
        for (var q = 0u; q < BK / 4u; q++) {
            let a0 = xs[(lid.y) * ROW + q];
            let a1 = xs[(lid.y + step) * ROW + q];
            let a2 = xs[(lid.y + 2u * step) * ROW + q];
            let a3 = xs[(lid.y + 3u * step) * ROW + q];
            let b0 = ws[(lid.x) * ROW + q];
            let b1 = ws[(lid.x + step) * ROW + q];
            let b2 = ws[(lid.x + 2u * step) * ROW + q];
            let b3 = ws[(lid.x + 3u * step) * ROW + q];
            acc0 += vec4<f32>(dot(a0, b0), dot(a0, b1), dot(a0, b2), dot(a0, b3));
            acc1 += vec4<f32>(dot(a1, b0), dot(a1, b1), dot(a1, b2), dot(a1, b3));
            acc2 += vec4<f32>(dot(a2, b0), dot(a2, b1), dot(a2, b2), dot(a2, b3));
            acc3 += vec4<f32>(dot(a3, b0), dot(a3, b1), dot(a3, b2), dot(a3, b3));
        }
        workgroupBarrier();
    }
    store_row(m0 + lid.y, n0 + lid.x, step, acc0);
    store_row(m0 + lid.y + step, n0 + lid.x, step, acc1);
    store_row(m0 + lid.y + 2u * step, n0 + lid.x, step, acc2);
    store_row(m0 + lid.y + 3u * step, n0 + lid.x, step, acc3);
}

// Token m's results for weight rows n, n + step, n + 2 step, n + 3 step.
fn store_row(m: u32, n: u32, step: u32, v: vec4<f32>) {
    store(m, n, v.x);
    store(m, n + step, v.y);
    store(m, n + 2u * step, v.z);
    store(m, n + 3u * step, v.w);
}
