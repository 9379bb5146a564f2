// Causal grouped-query attention for a prefill on GPUs: one workgroup per (KV head, token) takes
// all G = heads / kv_heads query heads that read that KV head, so each key and value row is read
// from memory once for the group (attention.wgsl reads it once per query head: 7 times in
// Qwen2.5-0.5B), 16 bytes at a time. Token t (at position pos in the sequence whose cache rows
// start at base) attends to cache rows base + 0 ..= base + pos, which kv_write has filled (RoPE
// applied); RoPE is applied to the queries as they are read (attention_query.wgsl). Keys are
// taken in blocks of WG, one per thread, with an online softmax per head.
// The Rust side runs it where D % 16 == 0, G <= MAX_HEADS and G x D <= 4 x QUADS (and, on a
// device that limits an invocation's loop passes, within AttentionDims::grouped_takes).
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;  // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> q: array<f32>;                 // [M, q_stride]: queries first, before RoPE
@group(0) @binding(3) var<storage, read> k_cache: array<vec4<f32>>;     // [rows, kv_heads * D]
@group(0) @binding(4) var<storage, read> v_cache: array<vec4<f32>>;     // [rows, kv_heads * D]
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;   // [M, heads * D]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;          // [D / 2] (rotary.wgsl)

// Set by the Rust side, which chooses this kernel only for groups they hold.
override WG: u32;         // threads, and keys per block (one each); a power of two
override MAX_HEADS: u32;  // most query heads per KV head
override SCORES: u32;     // MAX_HEADS x WG
override QUADS: u32;      // most vec4s of the group's queries (G x D / 4): 4 x WG, 4 per thread

var<workgroup> qs: array<vec4<f32>, QUADS>;  // [G, D / 4]: the queries, RoPE applied, pre-scaled by 1 / sqrt(D)
var<workgroup> scores: array<f32, SCORES>;   // [G, WG]: this block's scores, then its probabilities
var<workgroup> red: array<f32, SCORES>;      // [G, WG]: the block maximum's scratch
var<workgroup> run_max: array<f32, MAX_HEADS>;
var<workgroup> rescale: array<f32, MAX_HEADS>;  // exp(max before the block - max after it)
var<workgroup> seen: u32;

// One output vec4 so far and its head's softmax denominator so far.
struct Acc {
    value: vec4<f32>,
    sum: f32,
}

// Workgroup (KV head, token); after the scores, thread tid holds output quads tid, tid + WG,
// tid + 2 WG and tid + 3 WG of the group (quad o: head o / (D / 4), dims 4 (o % (D / 4)) ..),
// in named accumulators: an indexed local array would be left in slow memory by some compilers.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let g = wg.x;
    let t = wg.y;
    let d = shape.head_dim;
    let dq = d / 4u;
    let group = shape.heads / shape.kv_heads;
    let row_quads = shape.kv_heads * dq;
    let kv_off = g * dq;
    if tid == 0u {
        seen = token_meta[t].y + 1u;
    }
    let len = workgroupUniformLoad(&seen);
    let base = token_meta[t].x;
    let pos = token_meta[t].y;
    let scale = inverseSqrt(f32(d));
    let q0 = t * shape.q_stride + g * group * d;
    for (var o = tid; o < group * dq; o += WG) {
        qs[o] = query_quad(q0 + (o / dq) * d, o % dq, pos) * scale;
    }
    if tid < group {
        run_max[tid] = -3.4e38;
    }
    workgroupBarrier();

    var a0 = Acc(vec4<f32>(0.0), 0.0);
    var a1 = a0;
    var a2 = a0;
    var a3 = a0;
    for (var start = 0u; start < len; start += WG) {
        let n = min(WG, len - start);
        // Key start + tid against every query of the group, 4 quads of the key at a time.
        for (var h = 0u; h < group; h++) {
            scores[h * WG + tid] = -3.4e38;
        }
        if tid < n {
            let row = (base + start + tid) * row_quads + kv_off;
            for (var c = 0u; c < dq; c += 4u) {
                let k0 = k_cache[row + c];
                let k1 = k_cache[row + c + 1u];
                let k2 = k_cache[row + c + 2u];
                let k3 = k_cache[row + c + 3u];
                for (var h = 0u; h < group; h++) {
                    let at = h * dq + c;
                    let s = dot(qs[at], k0) + dot(qs[at + 1u], k1) + dot(qs[at + 2u], k2) + dot(qs[at + 3u], k3);
                    let i = h * WG + tid;
                    scores[i] = select(scores[i] + s, s, c == 0u);
                }
            }
        }
        for (var h = 0u; h < group; h++) {
            red[h * WG + tid] = scores[h * WG + tid];
        }
        workgroupBarrier();
        // Every head's block maximum at once.
        for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
            if tid < stride {
                for (var h = 0u; h < group; h++) {
                    red[h * WG + tid] = max(red[h * WG + tid], red[h * WG + tid + stride]);
                }
            }
            workgroupBarrier();
        }
        if tid < group {
            let m = max(run_max[tid], red[tid * WG]);
            rescale[tid] = exp(run_max[tid] - m);
            run_max[tid] = m;
        }
        workgroupBarrier();
        for (var h = 0u; h < group; h++) {
            let i = h * WG + tid;
            scores[i] = select(0.0, exp(scores[i] - run_max[h]), tid < n);
        }
        workgroupBarrier();
        let first = (base + start) * row_quads + kv_off;
        a0 = weigh_values(a0, tid, n, first, row_quads, dq, group);
        a1 = weigh_values(a1, tid + WG, n, first, row_quads, dq, group);
        a2 = weigh_values(a2, tid + 2u * WG, n, first, row_quads, dq, group);
        a3 = weigh_values(a3, tid + 3u * WG, n, first, row_quads, dq, group);
        workgroupBarrier();
    }
    // The group's heads are adjacent in out's row, so its quads are too.
    let out0 = (t * shape.heads + g * group) * dq;
    put(out0, tid, a0, dq, group);
    put(out0, tid + WG, a1, dq, group);
    put(out0, tid + 2u * WG, a2, dq, group);
    put(out0, tid + 3u * WG, a3, dq, group);
}

// Output quad o of the group so far, rescaled, plus this block's n probabilities times the value
// rows starting at quad `first` (stride `row_quads`); unchanged for o past the group.
fn weigh_values(a: Acc, o: u32, n: u32, first: u32, row_quads: u32, dq: u32, group: u32) -> Acc {
    if o >= group * dq {
        return a;
    }
    let h = o / dq;
    let c = o % dq;
    var value = a.value * rescale[h];
    var sum = a.sum * rescale[h];
    // Four value rows in flight at a time: each is a memory latency otherwise.
    let p0 = h * WG;
    var j = 0u;
    for (; j + 4u <= n; j += 4u) {
        let v0 = v_cache[first + j * row_quads + c];
        let v1 = v_cache[first + (j + 1u) * row_quads + c];
        let v2 = v_cache[first + (j + 2u) * row_quads + c];
        let v3 = v_cache[first + (j + 3u) * row_quads + c];
        let p = vec4<f32>(scores[p0 + j], scores[p0 + j + 1u], scores[p0 + j + 2u], scores[p0 + j + 3u]);
        value = fma(vec4<f32>(p.x), v0, value);
        value = fma(vec4<f32>(p.y), v1, value);
        value = fma(vec4<f32>(p.z), v2, value);
        value = fma(vec4<f32>(p.w), v3, value);
        sum += p.x + p.y + p.z + p.w;
    }
    for (; j < n; j++) {
        let p = scores[p0 + j];
        value = fma(vec4<f32>(p), v_cache[first + j * row_quads + c], value);
        sum += p;
    }
    return Acc(value, sum);
}

fn put(row: u32, o: u32, a: Acc, dq: u32, group: u32) {
    if o < group * dq {
        out[row + o] = a.value / a.sum;
    }
}
