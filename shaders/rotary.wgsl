// Rotary position embedding as HF Qwen2 applies it (rotate-half): within each head of D values,
// the pair (x[i], x[i + D/2]) is rotated by the angle pos * inv_freq[i]. Prepended to the kernels
// that apply it as they read (kv_write for keys, the attention kernels for queries and for the
// keys they append in a decode step: attention_append.wgsl), so it costs no pass of its own; each declares `inv_freq: array<f32>` ([D / 2], made on the CPU: GPU pow is
// too coarse once multiplied by a 32k position).

// GPU sin/cos lose accuracy far from zero (positions reach 32k radians), so bring the angle
// into [-pi, pi] first: 2 pi = C1 + C2 with C1 = 6.28125 exact in 8 bits, so k * C1 is exact.
fn reduce_angle(a: f32) -> f32 {
    let k = round(a * 0.15915494);
    return (a - k * 6.28125) - k * 0.0019353072;
}

// The index of the value that j (< D) is rotated with: j + D/2 or j - D/2.
fn rotary_partner(j: u32, d: u32) -> u32 {
    return select(j - d / 2u, j + d / 2u, j < d / 2u);
}

// Value j (< D) of a head at position `pos` after rotation, from its value and its partner's.
fn rotary(value: f32, partner: f32, j: u32, d: u32, pos: u32) -> f32 {
    let half = d / 2u;
    let angle = reduce_angle(f32(pos) * inv_freq[j % half]);
    let c = cos(angle);
    let s = sin(angle);
    if j < half {
        return value * c - partner * s;
    }
    return value * c + partner * s;
}
