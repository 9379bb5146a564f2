// Decode attention, first pass: the keys of each (token, query head) are split into chunks of
// WG (workgroup_reduce.wgsl's threads: the Rust side's ATTENTION_CHUNK), one key per thread and
// one workgroup per chunk, so a long context spreads over many workgroups instead of making one
// workgroup walk it all. Each writes its chunk's softmax statistics and unnormalised output;
// attention_combine.wgsl merges the chunks. Causal GQA as in attention.wgsl, whose weighing of
// the values by quads and key subsets it shares (attention_values.wgsl).
// With APPEND (attention_append.wgsl) the workgroup whose chunk ends with the token's own key
// takes it and its value from q's row, and one query head per KV group writes them to the cache.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;  // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> q: array<f32>;              // [M, q_stride]: queries, keys, values, before RoPE
@group(0) @binding(3) var<storage, read_write> k_cache: array<vec4<f32>>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(4) var<storage, read_write> v_cache: array<vec4<f32>>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(5) var<storage, read_write> partial: array<f32>;  // [M, heads, splits, D + 2]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;       // [D / 2] (rotary.wgsl)

var<workgroup> qs: array<vec4<f32>, 64>;  // the query, pre-scaled by 1 / sqrt(D), zero past D
var<workgroup> seen: u32;

// Workgroup (head, token, chunk).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let t = wg.y;
    let start = wg.z * WG;
    let d = shape.head_dim;
    if tid == 0u {
        seen = token_meta[t].y + 1u;
    }
    let len = workgroupUniformLoad(&seen);
    if start >= len {
        return;  // past this token's context: the combine pass never reads this chunk
    }
    let kv_width = shape.kv_heads * d;
    let kv_off = (h / (shape.heads / shape.kv_heads)) * d;
    let base = token_meta[t].x + start;
    let n = min(WG, len - start);
    let scale = inverseSqrt(f32(d));
    let q0 = t * shape.q_stride + h * d;
    let pos = token_meta[t].y;
    for (var c = tid; c < (d + 3u) / 4u; c += WG) {
        qs[c] = query_quad(q0, c, pos) * scale;
    }
    // With APPEND, whether this chunk ends with the token's own key (key n - 1).
    let has_new = APPEND && pos < start + WG;
    let new_at = new_key_at(t, kv_off);
    if has_new {
        load_new_key(new_at, pos, tid, WG);
    }
    workgroupBarrier();

    var score = -3.4e38;
    if tid < n {
        score = key_score((base + tid) * kv_width + kv_off, has_new && tid == n - 1u);
    }
    let chunk_max = reduce(score, tid, true);
    var p = 0.0;
    if tid < n {
        p = exp(score - chunk_max);
    }
    probs[tid] = p;
    let chunk_sum = reduce(p, tid, false);  // its barriers also publish probs[]

    let out = ((t * shape.heads + h) * shape.splits + wg.z) * (d + 2u);
    let stores = has_new && stores_new_rows(h);
    let fresh = select(NO_NEW, new_at, has_new);
    let sums = subset_total(weigh_quad(tid, n, base * kv_width + kv_off, kv_width, fresh, stores), tid);
    if tid < value_quads() {
        put(out, 4u * tid, sums.x);
        put(out, 4u * tid + 1u, sums.y);
        put(out, 4u * tid + 2u, sums.z);
        put(out, 4u * tid + 3u, sums.w);
    }
    if stores {
        store_new_key((base + n - 1u) * kv_width + kv_off, tid, WG);
    }
    if tid == 0u {
        partial[out + d] = chunk_max;
        partial[out + d + 1u] = chunk_sum;
    }
}

fn put(row: u32, i: u32, value: f32) {
    if i < shape.head_dim {
        partial[row + i] = value;
    }
}
