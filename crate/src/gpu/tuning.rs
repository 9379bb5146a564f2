//! Where the GPU family's kernels change path: thresholds reasoned from a large GPU's shape (see
//! each default's comment where it is read), which only measurement can settle. Each can be set
//! when the device is opened (`--tune` on the command line), so one run on a GPU can time both
//! sides of every threshold without a rebuild. Every setting gives the same results: each path is
//! exact for any batch.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ops::MATVEC_MAX_ROWS;

/// The thresholds. [`Tuning::default`] is what the engine runs unless told otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tuning {
    /// A decode batch (at most 8 tokens) splits attention across workgroups along the keys once
    /// a token sees more than this many keys; up to it one workgroup per (head, token) walks
    /// them all. Default: one chunk (64 keys).
    pub split_attention_after: u32,
    /// Batches of up to this many token rows run the linear layers as matvec, the norm and
    /// SwiGLU before them folded in; more run matmul. 0 to 32 (matvec's most); default 32.
    pub matvec_max_rows: u32,
    /// A matmul that makes at least this many 64 x 64 tiles runs in them, else in 32 x 32 tiles.
    /// Default 256.
    pub matmul_64_from_tiles: u32,
    /// A matmul that makes fewer 32 x 32 tiles than this splits K in parts where the layer's K
    /// is long enough (0: never). At most 1,024 (the partial sums' buffer grows with it: 32 KiB
    /// a tile). Default 256.
    pub split_k_below_tiles: u32,
}

/// Largest [`Tuning::split_k_below_tiles`].
pub const SPLIT_K_MAX_TILES: u32 = 1024;

impl Default for Tuning {
    fn default() -> Self {
        Self {
            // Up to one chunk the split would do the whole kernel's work in one workgroup per
            // (head, token), plus a dispatch to merge one chunk.
            split_attention_after: crate::ops::ATTENTION_CHUNK as u32,
            // matvec spreads a layer over N / 8 workgroups (112 for an 896-wide output) where
            // 32 x 32 matmul tiles make N / 32 (28), and reads the weights from memory once,
            // then from cache for each block of 8 rows.
            matvec_max_rows: MATVEC_MAX_ROWS,
            // 32 x 32 tiles make four times as many workgroups: a large GPU has over 100 compute
            // units, each wanting a few.
            matmul_64_from_tiles: 256,
            // The bar 64 x 64 tiles have. 0.5B's down_proj (N = 896, K = 4,864) at 128 tokens
            // makes 112 tiles, each walking 304 steps of K: on a GPU of over 100 compute units
            // one short workgroup per unit, with little to hide its loads' latency, for the
            // layer's longest dispatch. In 8 parts it makes 896 workgroups of 38 steps.
            split_k_below_tiles: 256,
        }
    }
}

impl std::str::FromStr for Tuning {
    type Err = Error;

    /// `name=value` pairs, comma-separated, over the defaults: `split-attention-after=256,matvec-max-rows=8`.
    fn from_str(text: &str) -> Result<Self> {
        let mut tuning = Tuning::default();
        let names = Tuning::default().settings().map(|(name, _)| name).join(", ");
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Input(format!("tuning {pair:?}: write name=value ({names})")))?;
            let (name, value) = (name.trim(), value.trim());
            let value = value
                .parse()
                .map_err(|_| Error::Input(format!("tuning {name}: {value:?} is not a whole number of 0 or more")))?;
            let unknown = || Error::Input(format!("no tuning setting {name:?}: the settings are {names}"));
            *tuning.setting_mut(name).ok_or_else(unknown)? = value;
        }
        tuning.check()?;
        Ok(tuning)
    }
}

impl Tuning {
    /// Each setting's name on the command line and its value.
    fn settings(&self) -> [(&'static str, u32); 4] {
        [
            ("split-attention-after", self.split_attention_after),
            ("matvec-max-rows", self.matvec_max_rows),
            ("matmul-64-from-tiles", self.matmul_64_from_tiles),
            ("split-k-below-tiles", self.split_k_below_tiles),
        ]
    }

    /// The setting of this name.
    fn setting_mut(&mut self, name: &str) -> Option<&mut u32> {
        match name {
            "split-attention-after" => Some(&mut self.split_attention_after),
            "matvec-max-rows" => Some(&mut self.matvec_max_rows),
            "matmul-64-from-tiles" => Some(&mut self.matmul_64_from_tiles),
            "split-k-below-tiles" => Some(&mut self.split_k_below_tiles),
            _ => None,
        }
    }

    /// An error naming the setting that is out of its range.
    pub fn check(&self) -> Result<()> {
        if self.matvec_max_rows > MATVEC_MAX_ROWS {
            return Err(Error::Input(format!(
                "tuning matvec-max-rows: {} (matvec serves at most {MATVEC_MAX_ROWS} token rows)",
                self.matvec_max_rows
            )));
        }
        if self.split_k_below_tiles > SPLIT_K_MAX_TILES {
            return Err(Error::Input(format!(
                "tuning split-k-below-tiles: {} (at most {SPLIT_K_MAX_TILES})",
                self.split_k_below_tiles
            )));
        }
        Ok(())
    }

    /// Every setting with its default and range, as the CLI's help and the README state them.
    pub fn defaults_text() -> String {
        let d = Tuning::default();
        format!(
            "split-attention-after={} (keys), matvec-max-rows={} (0 to {MATVEC_MAX_ROWS}), matmul-64-from-tiles={} and \
             split-k-below-tiles={} (0: never; at most {SPLIT_K_MAX_TILES})",
            d.split_attention_after, d.matvec_max_rows, d.matmul_64_from_tiles, d.split_k_below_tiles
        )
    }

    /// The settings that differ from the defaults, as `--tune` takes them (empty: none).
    pub fn changes(&self) -> String {
        let defaults = Tuning::default().settings();
        let changed = self.settings().into_iter().zip(defaults).filter(|(this, default)| this.1 != default.1);
        changed.map(|((name, value), _)| format!("{name}={value}")).collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_over_the_defaults_and_print_back() {
        let t: Tuning = "split-attention-after=256, matvec-max-rows=8".parse().unwrap();
        assert_eq!(t, Tuning { split_attention_after: 256, matvec_max_rows: 8, ..Tuning::default() });
        assert_eq!(t.changes(), "split-attention-after=256,matvec-max-rows=8");
        assert_eq!(t.changes().parse::<Tuning>().unwrap(), t);
        assert_eq!("".parse::<Tuning>().unwrap(), Tuning::default());
        assert_eq!(Tuning::default().changes(), "");
        let t: Tuning = "split-k-below-tiles=0,matmul-64-from-tiles=0,matvec-max-rows=0".parse().unwrap();
        assert_eq!((t.split_k_below_tiles, t.matmul_64_from_tiles, t.matvec_max_rows), (0, 0, 0));
        // Every setting's name reaches its own field.
        let mut t = Tuning::default();
        for (i, (name, _)) in Tuning::default().settings().into_iter().enumerate() {
            *t.setting_mut(name).unwrap() = 1000 + i as u32;
        }
        let values: Vec<u32> = t.settings().iter().map(|(_, v)| *v).collect();
        assert_eq!(values, [1000, 1001, 1002, 1003]);
    }

    /// The CLI's help is made from the defaults; the README states them in the same words, so a
    /// changed default fails here until the README says it.
    #[test]
    fn the_readme_states_the_defaults() {
        let readme = include_str!("../../../README.md").split_whitespace().collect::<Vec<_>>().join(" ");
        let text = Tuning::defaults_text();
        assert!(readme.contains(&text), "the README's --tune paragraph should say: {text}");
        // The text holds each setting with its default value.
        for (name, value) in Tuning::default().settings() {
            assert!(text.contains(&format!("{name}={value}")), "{text}");
        }
    }

    #[test]
    fn bad_settings_fail_naming_what_is_wrong() {
        let err = |text: &str| text.parse::<Tuning>().unwrap_err().to_string();
        assert!(err("split-after=3").contains("no tuning setting \"split-after\""), "{}", err("split-after=3"));
        assert!(err("split-after=3").contains("split-attention-after, matvec-max-rows"));
        assert!(err("matvec-max-rows").contains("write name=value"));
        assert!(err("matvec-max-rows=-1").contains("not a whole number"));
        assert!(err("matvec-max-rows=33").contains("at most 32 token rows"));
        assert!(err("split-k-below-tiles=5000").contains("at most 1024"));
    }
}
