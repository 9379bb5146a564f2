// Causal grouped-query attention over the KV cache, one query head at a time: decode steps, and
// prefills whose head shapes attention_grouped.wgsl (all heads of a KV head at once) does not take.
// Token t (at position pos in the sequence whose cache rows start at base) attends to cache rows
// base + 0 ..= base + pos. Query head h reads kv head h / (heads / kv_heads). Keys are scanned in
// blocks with an online softmax, so any length fits in a fixed amount of workgroup memory; each
// thread weighs one quad of the values over a subset of a block's keys (attention_values.wgsl).
// RoPE is applied to the query as it is read (rotary.wgsl); the cached keys have it already.
// With APPEND (attention_append.wgsl) the token's own key and value come from q's row, and one
// query head per KV group writes them to the cache.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;     // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> q: array<f32>;              // [M, q_stride]: queries, keys, values, before RoPE
@group(0) @binding(3) var<storage, read_write> k_cache: array<vec4<f32>>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(4) var<storage, read_write> v_cache: array<vec4<f32>>;  // [rows, kv_heads * D] (written with APPEND)
@group(0) @binding(5) var<storage, read_write> out: array<f32>;      // [M, heads * D]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;       // [D / 2] (rotary.wgsl)

var<workgroup> qs: array<vec4<f32>, 64>;  // this head's query, pre-scaled by 1 / sqrt(D), zero past D
var<workgroup> seen: u32;

// One workgroup per (head, token).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let t = wg.y;
    let d = shape.head_dim;
    let kv_width = shape.kv_heads * d;
    let kv_off = (h / (shape.heads / shape.kv_heads)) * d;
    let base = token_meta[t].x;
    if tid == 0u {
        seen = token_meta[t].y + 1u;
    }
    let len = workgroupUniformLoad(&seen);
    let scale = inverseSqrt(f32(d));
    let q0 = t * shape.q_stride + h * d;
    let pos = token_meta[t].y;
    for (var c = tid; c < (d + 3u) / 4u; c += WG) {
        qs[c] = query_quad(q0, c, pos) * scale;
    }
    let new_at = new_key_at(t, kv_off);
    if APPEND {
        load_new_key(new_at, pos, tid, WG);
    }
    workgroupBarrier();

    var run_max = -3.4e38;
    var run_sum = 0.0;
    // This thread's output quad for its subset of the keys (attention_values.wgsl).
    var acc = vec4<f32>(0.0);
    for (var start = 0u; start < len; start += BLOCK) {
        let n = min(BLOCK, len - start);
        // With APPEND the last block ends with the token's own key.
        let has_new = APPEND && start + n == len;
        var local_max = -3.4e38;
        for (var j = tid; j < n; j += WG) {
            let s = key_score((base + start + j) * kv_width + kv_off, has_new && j == n - 1u);
            probs[j] = s;
            local_max = max(local_max, s);
        }
        let new_max = max(run_max, reduce(local_max, tid, true));
        var local_sum = 0.0;
        for (var j = tid; j < n; j += WG) {
            let p = exp(probs[j] - new_max);
            probs[j] = p;
            local_sum += p;
        }
        let block_sum = reduce(local_sum, tid, false);  // its barriers also publish probs[]
        let rescale = exp(run_max - new_max);
        run_sum = run_sum * rescale + block_sum;
        run_max = new_max;
        let first = (base + start) * kv_width + kv_off;
        let fresh = select(NO_NEW, new_at, has_new);
        let stores = has_new && stores_new_rows(h);
        acc = acc * rescale + weigh_quad(tid, n, first, kv_width, fresh, stores);
        workgroupBarrier();
    }
    if APPEND && stores_new_rows(h) {
        store_new_key((base + pos) * kv_width + kv_off, tid, WG);
    }
    let total = subset_total(acc, tid) / run_sum;
    if tid < value_quads() {
        let out0 = (t * shape.heads + h) * d;
        put(out0, 4u * tid, total.x);
        put(out0, 4u * tid + 1u, total.y);
        put(out0, 4u * tid + 2u, total.z);
        put(out0, 4u * tid + 3u, total.w);
    }
}

fn put(row: u32, i: u32, value: f32) {
    if i < shape.head_dim {
        out[row + i] = value;
    }
}
