//! The first-order cost model `T = T_prefill(P) + N x T_decode` fitted to measurements, and the
//! roofline figures that explain it: decode is bandwidth-bound (all weights read per token),
//! prefill compute-bound (weights read once for all P tokens).

use serde::Serialize;

use crate::config::Qwen2Config;

/// `T_prefill(P) = fixed_ms + per_token_ms * P`, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PrefillFit {
    pub fixed_ms: f64,
    pub per_token_ms: f64,
}

impl PrefillFit {
    /// Least-squares line through `(P, ms)` points with a fixed cost of at least zero; `None`
    /// with fewer than two distinct P. A negative fixed cost means nothing (the page would teach
    /// that a prompt of no tokens saves time), but noise on short prompts fits one easily (two
    /// prompts on lavapipe: T = -54 ms + 61 ms x P): where the free line's would be negative,
    /// the best line under the constraint is the least-squares line through the origin.
    pub fn fit(points: &[(f64, f64)]) -> Option<Self> {
        let n = points.len() as f64;
        let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
        if points.len() < 2 || sxx == 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let per_token_ms = sxy / sxx;
        let fixed_ms = my - per_token_ms * mx;
        if fixed_ms >= 0.0 {
            return Some(Self { fixed_ms, per_token_ms });
        }
        let (xy, xx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x * y, b + x * x));
        Some(Self { fixed_ms: 0.0, per_token_ms: xy / xx })
    }

    pub fn at(&self, tokens: f64) -> f64 {
        self.fixed_ms + self.per_token_ms * tokens
    }
}

/// The model: prefill line plus a constant decode step.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CostModel {
    pub prefill: PrefillFit,
    pub decode_ms: f64,
}

impl CostModel {
    /// `T = T_prefill(P) + N x T_decode`.
    pub fn predict(&self, prompt_tokens: f64, decode_steps: f64) -> f64 {
        self.prefill.at(prompt_tokens) + decode_steps * self.decode_ms
    }
}

/// Multiply-adds x 2 of a forward over `tokens` new tokens after `past` cached ones, with the
/// LM head on `head_rows` rows: the matmuls plus attention's two products.
pub fn forward_flops(c: &Qwen2Config, tokens: usize, past: usize, head_rows: usize) -> f64 {
    let (h, kv, i) = (c.hidden_size as f64, c.kv_dim() as f64, c.intermediate_size as f64);
    let per_token = 2.0 * (h * h * 2.0 + 2.0 * h * kv + 3.0 * h * i) * c.num_hidden_layers as f64;
    // Attention: token t (0-based) sees past + t + 1 keys: q.k and p.v, over all heads.
    let t = tokens as f64;
    let seen = t * past as f64 + t * (t + 1.0) / 2.0;
    let attention = 2.0 * 2.0 * h * seen * c.num_hidden_layers as f64;
    per_token * t + attention + 2.0 * h * c.vocab_size as f64 * head_rows as f64
}

/// Middle value (the mean of the two middle ones for an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_recovered_exactly() {
        let points: Vec<(f64, f64)> = [32.0, 128.0, 512.0].iter().map(|&p| (p, 5.0 + 0.25 * p)).collect();
        let fit = PrefillFit::fit(&points).unwrap();
        assert!((fit.fixed_ms - 5.0).abs() < 1e-9 && (fit.per_token_ms - 0.25).abs() < 1e-12);
        let model = CostModel { prefill: fit, decode_ms: 20.0 };
        assert!((model.predict(100.0, 6.0) - (5.0 + 25.0 + 120.0)).abs() < 1e-9);
        assert!(PrefillFit::fit(&[(1.0, 2.0)]).is_none());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn a_fixed_cost_is_never_negative() {
        // The free line through these is T = -54 + 61 P (the bench's two prompts on lavapipe).
        let points = [(33.0, 1959.9), (70.0, 4217.9)];
        let fit = PrefillFit::fit(&points).unwrap();
        assert_eq!(fit.fixed_ms, 0.0);
        // The least-squares slope through the origin: sum(P T) / sum(P^2).
        let slope = (33.0 * 1959.9 + 70.0 * 4217.9) / (33.0f64.powi(2) + 70.0f64.powi(2));
        assert!((fit.per_token_ms - slope).abs() < 1e-9, "{fit:?}");
        // A positive fixed cost is kept as fitted.
        let kept = PrefillFit::fit(&[(10.0, 30.0), (20.0, 50.0)]).unwrap();
        assert!((kept.fixed_ms - 10.0).abs() < 1e-9 && (kept.per_token_ms - 2.0).abs() < 1e-12);
    }

    #[test]
    fn flops_of_the_0_5b_model_are_about_twice_its_matrix_parameters_per_token() {
        let c = Qwen2Config::qwen2_5_0_5b();
        let one = forward_flops(&c, 1, 0, 0);
        let matrices = (c.parameter_count() - (c.vocab_size * c.hidden_size) as u64) as f64;
        assert!((one / (2.0 * matrices) - 1.0).abs() < 0.01, "{one}");
    }
}
