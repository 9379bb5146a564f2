// Linear layer (interface in linear.wgsl) for lavapipe: linear_direct.wgsl's products (no
// workgroup memory, no barriers), each invocation computing a BLOCK_M x BLOCK_N block (token
// rows x weight rows) straight from memory.
// lavapipe makes each lane's load of a storage buffer loads of its own, one bounds-checked
// scalar load per lane and component (Mesa 22.3 loops over the lanes, putting each value into
// the vector through memory: in a profile of a 128-row prefill with w in storage, about 40% of
// the samples waited on those reloads). So w is a texture (linear_w_texture.wgsl), whose texels
// it fetches for all lanes at once, and x a uniform window where one holds a block's rows
// (linear_x_uniform.wgsl), loaded once for all lanes; a value of x serves BLOCK_N weight rows and
// a weight BLOCK_M token rows. Registers matter less than on a GPU: a spilled accumulator costs
// a cache access. Measured on lavapipe (two threads, 0.5B's shapes at 128 token rows), 16 x 16
// blocks ran prefill about 2.5 times as fast as 4 x 4 ones with w in storage (32-row blocks were
// slower), and with w a texture as fast as 16 x 8, 8 x 16, 8 x 8 or 4 x 8 ones, or faster.
// The loops over a block have constant trip counts, which lavapipe unrolls, so its arrays
// become registers; SwiftShader keeps such loops, so it runs linear_direct.wgsl instead.
// Weights and x are read 16 bytes at a time wherever rows allow it (16-bit rows with K a
// multiple of 8; quantized rows' x), which makes fewer, larger loops. A dispatch reads the
// columns x_cols() from x_first_col() on: all of K, or one part of x (linear_x_uniform.wgsl).
// The Rust side picks the block by the batch: 1 x 8 for one token (a block of more token rows
// would compute it over again), 4 x 8 for a few, 16 x 16 for a prefill (fewer token rows where
// x is read through a uniform window that holds fewer).
override BLOCK_M: u32 = 16u;  // at most MAX_BLOCK
override BLOCK_N: u32 = 16u;  // a multiple of 4, at most MAX_BLOCK
// Invocations per workgroup (set by the Rust side, whose grid arithmetic reads the same
// constant). Small, so that a layer of few rows still spreads over every CPU thread.
override WORKGROUP: u32;

const MAX_BLOCK: u32 = 16u;

// An invocation's dot products: [token i][weight row quad g], the quad's 4 rows in a vec4.
alias Block = array<array<vec4<f32>, 4>, MAX_BLOCK>;
// Where each row of a block starts: words of w, or values of x.
alias RowStarts = array<u32, MAX_BLOCK>;

// Where the invocation's rows start (rows past the end read the last row: in bounds,
// branch-free; their results are dropped; xrow counts from the start of x's binding), and its
// dot products. Private, so that the dot product functions share them without copies: passed
// by value, lavapipe ran prefill 20% slower.
var<private> wrow: RowStarts;
var<private> xrow: RowStarts;
var<private> acc: Block;

// gid.x: a block of BLOCK_N weight rows; the workgroup's y (its gid.y: workgroups are one
// invocation tall): a block of BLOCK_M token rows, counted from the dispatch's first row (0 but
// for a window of x: linear_x_uniform.wgsl). Taken from the workgroup's id and uniforms, the
// token rows are the same for every invocation as the compiler sees it, so x read through a
// uniform binding is loaded once for them all.
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let n0 = gid.x * BLOCK_N;
    let m0 = x_first_row() + group.y * BLOCK_M;
    if n0 >= shape.n || m0 >= tokens.m {
        return;
    }
    for (var j = 0u; j < BLOCK_N; j++) {
        wrow[j] = min(n0 + j, shape.n - 1u) * row_words(shape.k);
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        xrow[i] = x_row_at(min(m0 + i, tokens.m - 1u));
    }
    if DTYPE >= 3u {
        add_quantized();
    } else if DTYPE < 2u && shape.k % 8u == 0u && x_cols() % 8u == 0u {
        add_wide();
    } else {
        add_pairs();
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        for (var j = 0u; j < BLOCK_N; j++) {
            store(m0 + i, n0 + j, acc[i][j / 4u][j % 4u]);
        }
    }
}

// Eight values of each weight row of a block.
alias BlockWeights = array<array<vec4<f32>, 2>, MAX_BLOCK>;

// 16-bit rows with K a multiple of 8 (16-byte aligned rows): 8 values of each weight row and of
// each token row per step, one load each.
fn add_wide() {
    let first = x_first_col() / 8u;
    for (var q = 0u; q < x_cols() / 8u; q++) {
        var ws: BlockWeights;
        for (var j = 0u; j < BLOCK_N; j++) {
            ws[j] = unpack_eight(weight_load(wrow[j] / 4u + first + q));
        }
        for (var i = 0u; i < BLOCK_M; i++) {
            let at = (xrow[i] + 8u * q) / 4u;
            let lo = x[at];
            let hi = x[at + 1u];
            for (var g = 0u; g < BLOCK_N / 4u; g++) {
                acc[i][g] += four_rows(lo, hi, ws[4u * g], ws[4u * g + 1u], ws[4u * g + 2u], ws[4u * g + 3u]);
            }
        }
    }
}

// Any float rows (f32, or K not a multiple of 8): two values a step, read by the word.
fn add_pairs() {
    let first = x_first_col() / 2u;
    for (var p = 0u; p < x_cols() / 2u; p++) {
        var ws: array<vec2<f32>, MAX_BLOCK>;
        for (var j = 0u; j < BLOCK_N; j++) {
            ws[j] = weight_pair_at(wrow[j], first + p, shape.k);
        }
        for (var i = 0u; i < BLOCK_M; i++) {
            let xv = vec2<f32>(x_value(xrow[i] + 2u * p), x_value(xrow[i] + 2u * p + 1u));
            for (var g = 0u; g < BLOCK_N / 4u; g++) {
                let r = 4u * g;
                acc[i][g] += vec4<f32>(dot(xv, ws[r]), dot(xv, ws[r + 1u]), dot(xv, ws[r + 2u]), dot(xv, ws[r + 3u]));
            }
        }
    }
}

// Block b's scales of a quad of weight rows: d, and `second` (Q4_K: the mins; Q6_K: the scales
// of the block's second 16 values).
struct QuadScales {
    d: vec4<f32>,
    second: vec4<f32>,
}

fn quad_scales(g: u32, b: u32) -> QuadScales {
    let s0 = block_scale_min(wrow[4u * g], b);
    let s1 = block_scale_min(wrow[4u * g + 1u], b);
    let s2 = block_scale_min(wrow[4u * g + 2u], b);
    let s3 = block_scale_min(wrow[4u * g + 3u], b);
    return QuadScales(vec4<f32>(s0.x, s1.x, s2.x, s3.x), vec4<f32>(s0.y, s1.y, s2.y, s3.y));
}

// Quantized rows, a block of 32 values loaded at a time and used 8 values a step; each row's
// block scale (and Q4_K min, or Q6_K second scale) is read once per block of 32 and applies to
// a quad of rows' dot products at once (not a lookup per value pair).
fn add_quantized() {
    let first = x_first_col() / 32u;
    for (var b = 0u; b < x_cols() / 32u; b++) {
        var quants: array<BlockQuants, MAX_BLOCK>;
        var scales: array<QuadScales, 4>;
        for (var g = 0u; g < BLOCK_N / 4u; g++) {
            scales[g] = quad_scales(g, first + b);
        }
        for (var j = 0u; j < BLOCK_N; j++) {
            quants[j] = block_quants(wrow[j], first + b);
        }
        for (var e = 0u; e < 4u; e++) {
            let v = 32u * b + 8u * e;
            var ws: BlockWeights;
            for (var j = 0u; j < BLOCK_N; j++) {
                ws[j] = quant_eight(quants[j], e);
            }
            // Q6_K's second 16 values take the second scales.
            let second_half = DTYPE == 7u && e >= 2u;
            for (var i = 0u; i < BLOCK_M; i++) {
                let at = (xrow[i] + v) / 4u;  // K is whole blocks of 32: 16-byte aligned
                let lo = x[at];
                let hi = x[at + 1u];
                let sum = dot(lo + hi, vec4<f32>(1.0));
                for (var g = 0u; g < BLOCK_N / 4u; g++) {
                    acc[i][g] += four_rows(lo, hi, ws[4u * g], ws[4u * g + 1u], ws[4u * g + 2u], ws[4u * g + 3u]) * select(scales[g].d, scales[g].second, second_half);
                    if DTYPE == 6u {
                        acc[i][g] -= scales[g].second * sum;
                    }
                }
            }
        }
    }
}
