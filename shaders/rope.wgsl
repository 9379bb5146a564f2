// Rotary position embedding as HF Qwen2 applies it (rotate-half), in place:
// for each head, (x[i], x[i + D/2]) is rotated by pos * theta^(-2i / D).
struct Shape {
    heads: u32,      // heads in x (query heads, or key heads)
    head_dim: u32,   // D
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;   // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> inv_freq: array<f32>;     // [D / 2]: theta^(-2i / D), from the CPU
@group(0) @binding(3) var<storage, read_write> x: array<f32>;      // [M, heads * D]

// GPU sin/cos lose accuracy far from zero (positions reach 32k radians), so bring the angle
// into [-pi, pi] first: 2 pi = C1 + C2 with C1 = 6.28125 exact in 8 bits, so k * C1 is exact.
fn reduce_angle(a: f32) -> f32 {
    let k = round(a * 0.15915494);
    return (a - k * 6.28125) - k * 0.0019353072;
}

// One thread per (token, head, i < D/2); the grid's y is exactly M.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = shape.head_dim / 2u;
    let t = gid.y;
    if gid.x >= shape.heads * half {
        return;
    }
    let head = gid.x / half;
    let i = gid.x % half;
    // inv_freq comes from the CPU: GPU pow is too coarse once multiplied by a 32k position.
    let angle = reduce_angle(f32(token_meta[t].y) * inv_freq[i]);
    let c = cos(angle);
    let s = sin(angle);
    let at = t * shape.heads * shape.head_dim + head * shape.head_dim + i;
    let a = x[at];
    let b = x[at + half];
    x[at] = a * c - b * s;
    x[at + half] = b * c + a * s;
}
