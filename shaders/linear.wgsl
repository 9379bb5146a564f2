// The interface every linear-layer kernel shares (matmul, matvec, linear_direct), prepended to
// each: y[m, n_offset + n] (+)= x[m, :] . w[n, :] + bias[row_start + n], where w is one row
// chunk of a HF Linear weight ([out, in], packed; see packed.wgsl), starting at its row
// row_start (n_offset exceeds it where several layers fill one output side by side). x and w
// are read 16 bytes at a time where rows allow it (x[i], weight_load(i)), else through x_value
// and weight_word.
// With SWIGLU (matmul and matvec) w is gate_proj's rows then up_proj's, in one chunk, and the
// layer writes the MLP's activation instead: y[m, o] = silu(gate[m, o]) * up[m, o], o < n / 2.
struct Shape {
    k: u32,          // K, even
    n: u32,          // rows of w in this chunk
    n_offset: u32,   // first output column written by this chunk
    out_cols: u32,   // row stride of y
    row_start: u32,  // first row of this chunk in its layer (and its bias)
    eps: f32,        // the folded RMSNorm's epsilon (with NORM)
    splits: u32,     // parts of K in split-K (matmul's SPLIT, split_sum)
    _pad2: u32,
}
struct Tokens {
    m: u32,          // M: rows of x (all tokens of the batch)
}
override HAS_BIAS: bool = false;
override ACCUMULATE: bool = false;  // y += result: fuses the residual add
// Folded inputs (matvec only; the other kernels take the input made by a pass of its own):
// NORM: x is the residual stream and the layer's input is RMSNorm(x), `aux` the norm weight;
// GLU: x is the gate projection and the layer's input is silu(x) * `aux`, the up projection.
override NORM: bool = false;
override GLU: bool = false;
override SWIGLU: bool = false;
// Columns per part where y is written in parts (0: y is [M, out_cols]): part p holds columns
// p Y_PART .. (p + 1) Y_PART - 1 as [M, Y_PART], the parts one after another ([P][M][Y_PART],
// M x out_cols values as before), for a layer after it that reads them a part at a time
// (linear_x_uniform.wgsl's X_PART).
override Y_PART: u32 = 0u;

@group(0) @binding(0) var<uniform> tokens: Tokens;
@group(0) @binding(1) var<uniform> shape: Shape;
// @binding(2): x, [M, K] row-major (or in parts: linear_x_uniform.wgsl), a vec4 of values per
// element: linear_x.wgsl (storage), or linear_x_uniform.wgsl (a window of token rows through a
// uniform binding: lavapipe).
// @binding(3): w, [N, K] packed, read 16 bytes at a time by weight_load: linear_w.wgsl (storage),
// or linear_w_texture.wgsl (a texture: lavapipe).
@group(0) @binding(4) var<storage, read> bias: array<f32>;         // [rows of the layer] (read with HAS_BIAS)
@group(0) @binding(5) var<storage, read_write> y: array<f32>;      // [M, out_cols]
@group(0) @binding(6) var<storage, read> aux: array<vec4<f32>>;    // NORM: [K]; GLU: [M, K]

// The weight row that row `row` of workgroup `group`'s block of `rows` weight rows holds
// (shape.n, past the layer: none). With SWIGLU the block is the gate rows of the workgroup's
// rows / 2 outputs, then their up rows.
fn block_weight_row(group: u32, row: u32, rows: u32) -> u32 {
    if !SWIGLU {
        return group * rows + row;
    }
    let half = shape.n / 2u;
    let o = group * (rows / 2u) + row % (rows / 2u);
    if o >= half {
        return shape.n;
    }
    return select(o, half + o, row >= rows / 2u);
}

// The scale and min of quantized block b (32 values) of the row starting at word `base` (min 0
// but for Q4_K; for Q6_K, the scales times d of the block's two halves of 16).
fn block_scale_min(base: u32, b: u32) -> vec2<f32> {
    if DTYPE == 7u {
        let head = base + quant_words(shape.k) + b / 8u * 5u;
        let t = 2u * (b % 8u);  // the first half's scale; both are in one word
        let scales = weight_word(head + t / 4u);
        let d = weight_word(head + 4u);
        return vec2<f32>(q6k_scale(scales, d, t), q6k_scale(scales, d, t + 1u));
    }
    if DTYPE == 6u {
        let head = base + quant_words(shape.k) + b / 8u * 4u;  // 16-byte aligned
        return q4k_scale_min(weight_load(head / 4u), b % 8u);
    }
    return vec2<f32>(pick_scale(weight_word(base + quant_words(shape.k) + b / 2u), b), 0.0);
}

// The extra bits of quantized block b of the row starting at word `base`: a Q5_0 block's fifth
// bits, or the high 2 bits of a Q6_K block's two halves of 16 (a word each); 0 for other formats.
fn block_high_bits(base: u32, b: u32) -> vec2<u32> {
    if DTYPE == 5u {
        return vec2<u32>(weight_word(fifth_bits_at(base, shape.k, b)), 0u);
    }
    if DTYPE == 7u {
        let at = base + shape.k / 8u + 2u * b;  // even: both words in one 16-byte load
        let pair = weight_load(at / 4u);
        return select(pair.xy, pair.zw, at % 4u == 2u);
    }
    return vec2<u32>(0u);
}

// Writes the dot product of token row m and weight row n, adding the bias and, with
// ACCUMULATE, what y held. Out-of-range (m, n) are skipped.
fn store(m: u32, n: u32, dot_product: f32) {
    if m >= tokens.m || n >= shape.n {
        return;
    }
    put(m, n, dot_product + bias_at(n));
}

// With SWIGLU: writes output o of token row m from its gate and up dot products (weight rows o
// and n / 2 + o). Out-of-range (m, o) are skipped.
fn store_swiglu(m: u32, o: u32, gate_dot: f32, up_dot: f32) {
    let half = shape.n / 2u;
    if m >= tokens.m || o >= half {
        return;
    }
    let gate = gate_dot + bias_at(o);
    // exp's argument capped: past about 88 it is infinite, which a GPU's float controls may
    // assume away (silu there is 0 either way).
    put(m, o, gate / (1.0 + exp(min(-gate, 80.0))) * (up_dot + bias_at(half + o)));
}

// The bias of weight row n (0 without HAS_BIAS).
fn bias_at(n: u32) -> f32 {
    if HAS_BIAS {
        return bias[shape.row_start + n];
    }
    return 0.0;
}

// Stores v as column n of the chunk's output for token row m (added to what y held, with
// ACCUMULATE).
fn put(m: u32, n: u32, v: f32) {
    var at = m * shape.out_cols + shape.n_offset + n;
    if Y_PART > 0u {
        // (The divisor never 0 as the compiler sees it, where this branch is dead.)
        let col = shape.n_offset + n;
        let part = max(Y_PART, 1u);
        at = (col / part * tokens.m + m) * part + col % part;
    }
    if ACCUMULATE {
        y[at] += v;
    } else {
        y[at] = v;
    }
}

// Value i of x and word i of w (weight_pairs.wgsl reads through it): the buffers are whole
// vec4s (`Gpu::storage`, and a texture's texels), so their rows need not be.
fn x_value(i: u32) -> f32 {
    return x[i / 4u][i % 4u];
}
fn weight_word(i: u32) -> u32 {
    return weight_load(i / 4u)[i % 4u];
}
