// Linear layer (interface in linear.wgsl) for GPUs at small M: decode, and short prefills where
// matmul's tiles would leave most of a GPU idle. K must be a multiple of 8 (every Qwen2.5 size
// is; other K go to matmul). Token rows are taken 8 at a time (B <= 8 per block). A 16-byte
// load holds 8 values of a 16-bit row, 4 of an f32 row, 16 of a Q8_0 row (half a block) or a
// whole Q4_0 block (or a Q5_0 or Q4_K block's nibbles, with one more word of fifth bits, or
// the super-block's scales); a quantized load's dot product is scaled once by its block's
// scale (Q4_K: less its min times the sum of the token row's values there).
// Decode is bandwidth-bound, so the weights are streamed once, 16 bytes per load: LANES
// threads walk a weight row along K, neighbours reading neighbouring 16-byte words
// (coalesced), each dotting them with all B token rows; the partial sums of a row meet in
// workgroup memory (no subgroups: wgpu on the web does not expose them). Results stay in two
// named vec4s: an indexed local array would be left in slow memory by some compilers.
// With NORM (an RMSNorm folded in), each block of token rows first has its sums of squares
// reduced the same way; the weights then meet x times the norm weight, and each token row's
// 1 / rms scales its finished dot products. With GLU (SwiGLU folded in) each workgroup applies
// the activation to the values it reads: a few thousand exp per workgroup, cheaper on a GPU than
// a dispatch and a pass over memory of its own. With SWIGLU a workgroup's first ROWS / 2 thread
// rows take the gate rows of its ROWS / 2 outputs and the others their up rows, and the first
// half stores silu(gate) * up.
// A workgroup is LANES x ROWS = 256 threads, both set by the Rust side: 32 lanes a row and 8 rows
// (a folded norm needs 8, see inverse_rms), or for long rows without one 64 lanes and 4 rows. A
// layer of few, long rows (0.5B's down_proj: 896 rows of 4,864 values) makes only N / 8
// workgroups, fewer than a large GPU's compute units, and too few loads in flight to stream
// memory at its bandwidth; 64 lanes a row put twice the threads (and loads) on the same rows.
override LANES: u32;        // threads per weight row
override ROWS: u32;         // weight rows per workgroup
var<workgroup> partial_lo: array<vec4<f32>, 256>;  // [ROWS, LANES]: token rows 0..3
var<workgroup> partial_hi: array<vec4<f32>, 256>;  // [ROWS, LANES]: token rows 4..7

// Values 4j .. 4j + 3 of token row b of the layer's input: x's; with NORM x's times the norm
// weight (the row's 1 / rms multiplies the finished dot products instead); with GLU the SwiGLU
// of the gate (x) and up projections.
fn xs(b: u32, j: u32) -> vec4<f32> {
    let at = b * (shape.k / 4u) + j;
    let v = x[at];
    if NORM {
        return v * aux[j];
    }
    if GLU {
        return v / (1.0 + exp(min(-v, vec4<f32>(80.0)))) * aux[at];  // capped as in store_swiglu
    }
    return v;
}

// Values of a row per 16-byte load.
fn values_per_load() -> u32 {
    switch DTYPE {
        case 2u: { return 4u; }
        case 3u: { return 16u; }
        case 4u, 5u, 6u, 7u: { return 32u; }
        default: { return 8u; }
    }
}

// Token row b times load i of a weight row (unscaled for quantized rows; `high`: a Q5_0
// block's fifth bits; Q6_K's two blocks of 16 are dotted by q6_dot instead).
fn row_dot(b: u32, i: u32, wv: vec4<u32>, high: u32) -> f32 {
    switch DTYPE {
        case 2u: {
            return dot(bitcast<vec4<f32>>(wv), xs(b, i));
        }
        case 3u: {
            let j = 4u * i;
            return dot(unpack_q8(wv.x), xs(b, j)) + dot(unpack_q8(wv.y), xs(b, j + 1u))
                + dot(unpack_q8(wv.z), xs(b, j + 2u)) + dot(unpack_q8(wv.w), xs(b, j + 3u));
        }
        case 4u: {
            let j = 8u * i;
            return dot(unpack_q4_lo(wv.x), xs(b, j)) + dot(unpack_q4_hi(wv.x), xs(b, j + 1u))
                + dot(unpack_q4_lo(wv.y), xs(b, j + 2u)) + dot(unpack_q4_hi(wv.y), xs(b, j + 3u))
                + dot(unpack_q4_lo(wv.z), xs(b, j + 4u)) + dot(unpack_q4_hi(wv.z), xs(b, j + 5u))
                + dot(unpack_q4_lo(wv.w), xs(b, j + 6u)) + dot(unpack_q4_hi(wv.w), xs(b, j + 7u));
        }
        case 6u: {
            let j = 8u * i;
            return dot(unpack_nibbles_lo(wv.x), xs(b, j)) + dot(unpack_nibbles_hi(wv.x), xs(b, j + 1u))
                + dot(unpack_nibbles_lo(wv.y), xs(b, j + 2u)) + dot(unpack_nibbles_hi(wv.y), xs(b, j + 3u))
                + dot(unpack_nibbles_lo(wv.z), xs(b, j + 4u)) + dot(unpack_nibbles_hi(wv.z), xs(b, j + 5u))
                + dot(unpack_nibbles_lo(wv.w), xs(b, j + 6u)) + dot(unpack_nibbles_hi(wv.w), xs(b, j + 7u));
        }
        case 5u: {
            let j = 8u * i;
            let h1 = high >> 8u;
            let h2 = high >> 16u;
            let h3 = high >> 24u;
            return dot(unpack_q5_lo(wv.x, high), xs(b, j)) + dot(unpack_q5_hi(wv.x, high), xs(b, j + 1u))
                + dot(unpack_q5_lo(wv.y, h1), xs(b, j + 2u)) + dot(unpack_q5_hi(wv.y, h1), xs(b, j + 3u))
                + dot(unpack_q5_lo(wv.z, h2), xs(b, j + 4u)) + dot(unpack_q5_hi(wv.z, h2), xs(b, j + 5u))
                + dot(unpack_q5_lo(wv.w, h3), xs(b, j + 6u)) + dot(unpack_q5_hi(wv.w, h3), xs(b, j + 7u));
        }
        default: {
            let values = unpack_eight(wv);
            return dot(values[0], xs(b, 2u * i)) + dot(values[1], xs(b, 2u * i + 1u));
        }
    }
}

// Token row b times 16 Q6_K values of load i: nibble words `lo` and `hi` (8 values each) and
// their high bits `high` (2 each); `half` 0 or 1 of the load.
fn q6_dot(b: u32, i: u32, lo: u32, hi: u32, high: u32, half: u32) -> f32 {
    let j = 8u * i + 4u * half;
    return dot(unpack_q6_lo(lo, high), xs(b, j)) + dot(unpack_q6_hi(lo, high), xs(b, j + 1u))
        + dot(unpack_q6_lo(hi, high >> 16u), xs(b, j + 2u)) + dot(unpack_q6_hi(hi, high >> 16u), xs(b, j + 3u));
}

// The scale and min of load i of the row starting at word `base`: (1, 0) for float rows, else
// its block's (block_scale_min; a Q8_0 load is half a block, the others a whole one).
fn load_scale_min(base: u32, i: u32) -> vec2<f32> {
    if DTYPE < 3u {
        return vec2<f32>(1.0, 0.0);
    }
    return block_scale_min(base, select(i, i / 2u, DTYPE == 3u));
}

// The sum of token row b's values under load i (a Q4_K block's min multiplies it).
fn row_sum(b: u32, i: u32) -> f32 {
    let j = 8u * i;
    let s = xs(b, j) + xs(b, j + 1u) + xs(b, j + 2u) + xs(b, j + 3u) + xs(b, j + 4u) + xs(b, j + 5u) + xs(b, j + 6u)
        + xs(b, j + 7u);
    return s.x + s.y + s.z + s.w;
}

// Token row b times load i of a weight row, scaled: `sm` is the load's scale and min (see
// load_scale_min), `bits` its extra bits (see block_high_bits).
fn load_dot(b: u32, i: u32, wv: vec4<u32>, bits: vec2<u32>, sm: vec2<f32>) -> f32 {
    if DTYPE == 7u {
        return sm.x * q6_dot(b, i, wv.x, wv.y, bits.x, 0u) + sm.y * q6_dot(b, i, wv.z, wv.w, bits.y, 1u);
    }
    var t = sm.x * row_dot(b, i, wv, bits.x);
    if DTYPE == 6u {
        t -= sm.y * row_sum(b, i);
    }
    return t;
}

@compute @workgroup_size(LANES, ROWS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let lane = lid.x;
    let n = block_weight_row(wg.x + wg.y * groups.x, lid.y, ROWS);
    let loads = shape.k / values_per_load();  // 16-byte loads of a weight row's values
    // Each block of 8 token rows reads the workgroup's weight rows again, from cache.
    for (var b0 = 0u; b0 < tokens.m; b0 += 8u) {
        block(b0, min(tokens.m - b0, 8u), n, lane, lid.y, loads);
    }
}

// With NORM, 1 / rms of token rows b0 .. b0 + 7 (1 without): thread row r sums the squares of
// token row b0 + r, its lanes meeting in partial_lo. Every thread calls it (it has barriers).
fn inverse_rms(b0: u32, b_count: u32, lane: u32, row: u32) -> array<vec4<f32>, 2> {
    if !NORM {
        return array(vec4<f32>(1.0), vec4<f32>(1.0));
    }
    var squares = 0.0;
    if row < b_count {
        for (var j = lane; j < shape.k / 4u; j += LANES) {
            let v = x[(b0 + row) * (shape.k / 4u) + j];
            squares += dot(v, v);
        }
    }
    let at = row * LANES + lane;
    partial_lo[at] = vec4<f32>(squares);
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial_lo[at] += partial_lo[at + stride];
        }
        workgroupBarrier();
    }
    let mean = array(
        vec4<f32>(row_total(0u), row_total(1u), row_total(2u), row_total(3u)),
        vec4<f32>(row_total(4u), row_total(5u), row_total(6u), row_total(7u)),
    );
    workgroupBarrier();  // block reuses partial_lo
    let k = f32(shape.k);
    return array(inverseSqrt(mean[0] / k + shape.eps), inverseSqrt(mean[1] / k + shape.eps));
}

// Thread row r's reduced sum of squares (inverse_rms; NORM runs 8 rows of 32 lanes). A function,
// so that its index is no constant out of bounds where the workgroup has 4 rows of 64 lanes.
fn row_total(r: u32) -> f32 {
    return partial_lo[r * LANES].x;
}

// Token rows b0 .. b0 + b_count (b_count <= 8) times weight row n, stored (with SWIGLU, by the
// thread rows of the gate rows, with their up rows' results).
fn block(b0: u32, b_count: u32, n: u32, lane: u32, row: u32, loads: u32) {
    let live = n < shape.n;
    let base = n * row_words(shape.k);  // a multiple of 4: rows are 16-byte aligned
    // A thread's loads go out four at a time, each round a round ahead of the dot products that
    // use it, the first before the folded norm's reduction and its barriers: one at a time, each
    // is a memory latency, and a layer with few rows and a long K (down_proj: 224 workgroups of
    // 64 lanes, 10 loads a thread) has too few threads to hide them.
    let last = loads - 1u;
    var ahead: Round;
    if live {
        ahead = fetch_round(base, lane, last);
    }
    let scales = inverse_rms(b0, b_count, lane, row);
    var sums = Sums(vec4<f32>(0.0), vec4<f32>(0.0));
    if live {
        for (var i = lane; i < loads; i += 4u * LANES) {
            let current = ahead;
            if i + 4u * LANES < loads {
                ahead = fetch_round(base, i + 4u * LANES, last);
            }
            sums = add_round(sums, b0, b_count, i, loads, current);
        }
    }
    let lo = sums.lo;
    let hi = sums.hi;
    let at = row * LANES + lane;
    partial_lo[at] = lo;
    partial_hi[at] = hi;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial_lo[at] += partial_lo[at + stride];
            partial_hi[at] += partial_hi[at + stride];
        }
        workgroupBarrier();
    }
    if lane < b_count {
        let scale = select(scales[0], scales[1], lane >= 4u);
        let sums = row_sums(row, lane) * scale;
        if !SWIGLU {
            store(b0 + lane, n, sums[lane % 4u]);
        } else if row < ROWS / 2u {
            // A gate row (n is its output, or past the layer), and ROWS / 2 rows on its up row.
            let up = row_sums(row + ROWS / 2u, lane) * scale;
            store_swiglu(b0 + lane, n, sums[lane % 4u], up[lane % 4u]);
        }
    }
    workgroupBarrier();  // the next block reuses partial_lo and partial_hi
}

// A thread's dot products so far with token rows 0..3 and 4..7 of a block, in named vectors (an
// indexed local array would be left in slow memory by some compilers).
struct Sums {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// Load i of the weight row starting at word `base`: its 16 bytes, extra bits and scale.
struct Load {
    words: vec4<u32>,
    bits: vec2<u32>,
    scale_min: vec2<f32>,
}

fn fetch(base: u32, i: u32) -> Load {
    return Load(weight_load(base / 4u + i), block_high_bits(base, i), load_scale_min(base, i));
}

// A thread's loads i, i + LANES, i + 2 LANES and i + 3 LANES of a weight row, clamped to its
// last load (the clamped ones are fetched again and skipped; a row of fewer loads than lanes
// clamps even the first).
struct Round {
    l0: Load,
    l1: Load,
    l2: Load,
    l3: Load,
}

fn fetch_round(base: u32, i: u32, last: u32) -> Round {
    let l0 = fetch(base, min(i, last));
    let l1 = fetch(base, min(i + LANES, last));
    let l2 = fetch(base, min(i + 2u * LANES, last));
    let l3 = fetch(base, min(i + 3u * LANES, last));
    return Round(l0, l1, l2, l3);
}

// `sums` plus the loads of round `r` (from load i) that lie within the row's `loads`.
fn add_round(sums: Sums, b0: u32, b_count: u32, i: u32, loads: u32, r: Round) -> Sums {
    var s = add_load(sums, b0, b_count, i, r.l0);
    if i + LANES < loads { s = add_load(s, b0, b_count, i + LANES, r.l1); }
    if i + 2u * LANES < loads { s = add_load(s, b0, b_count, i + 2u * LANES, r.l2); }
    if i + 3u * LANES < loads { s = add_load(s, b0, b_count, i + 3u * LANES, r.l3); }
    return s;
}

// `sums` plus load i (fetched as `l`) dotted with the block's b_count token rows from b0.
fn add_load(sums: Sums, b0: u32, b_count: u32, i: u32, l: Load) -> Sums {
    var lo = sums.lo;
    var hi = sums.hi;
    lo.x += load_dot(b0, i, l.words, l.bits, l.scale_min);
    if b_count > 1u { lo.y += load_dot(b0 + 1u, i, l.words, l.bits, l.scale_min); }
    if b_count > 2u { lo.z += load_dot(b0 + 2u, i, l.words, l.bits, l.scale_min); }
    if b_count > 3u { lo.w += load_dot(b0 + 3u, i, l.words, l.bits, l.scale_min); }
    if b_count > 4u {
        hi.x += load_dot(b0 + 4u, i, l.words, l.bits, l.scale_min);
        if b_count > 5u { hi.y += load_dot(b0 + 5u, i, l.words, l.bits, l.scale_min); }
        if b_count > 6u { hi.z += load_dot(b0 + 6u, i, l.words, l.bits, l.scale_min); }
        if b_count > 7u { hi.w += load_dot(b0 + 7u, i, l.words, l.bits, l.scale_min); }
    }
    return Sums(lo, hi);
}

// The reduced dot products of thread row `row` with the token rows of lane's half of the block.
fn row_sums(row: u32, lane: u32) -> vec4<f32> {
    return select(partial_lo[row * LANES], partial_hi[row * LANES], lane >= 4u);
}
