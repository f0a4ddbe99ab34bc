//! Training parameters, with XGBoost's names, aliases and defaults.

use serde::{Deserialize, Serialize};

use crate::{MlError, Objective};

/// Booster parameters (XGBoost's names; `set` takes them as strings, as XGBoost's `params`
/// dictionary does).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// `objective` (and `num_class` for `multi:softprob`). Default `reg:squarederror`.
    pub objective: Objective,
    /// `max_depth`: deepest a tree grows. Default 6; 0 is no limit (with `lossguide` and
    /// `max_leaves` only, as XGBoost).
    pub max_depth: usize,
    /// `max_leaves`: most leaves a tree has; 0 is no limit. Default 0.
    pub max_leaves: usize,
    /// `grow_policy`: `depthwise` (the default: a level at a time) or `lossguide` (the leaf
    /// whose split reduces the loss most first, LightGBM's way; with `max_leaves`).
    pub grow_policy: GrowPolicy,
    /// `eta` / `learning_rate`: shrinkage of each tree's outputs. Default 0.3.
    pub eta: f32,
    /// `lambda` / `reg_lambda`: L2 regularization of leaf weights. Default 1.
    pub lambda: f64,
    /// `alpha` / `reg_alpha`: L1 regularization of leaf weights. Default 0.
    pub alpha: f64,
    /// `gamma` / `min_split_loss`: least loss reduction a split must make. Default 0.
    pub gamma: f64,
    /// `min_child_weight`: least hessian sum of a child. Default 1.
    pub min_child_weight: f64,
    /// `subsample`: fraction of rows each tree is grown on. Default 1.
    pub subsample: f64,
    /// `colsample_bytree`: fraction of features each tree may split on. Default 1.
    pub colsample_bytree: f64,
    /// `max_bin`: most bins per feature. Default 256 (at most 255 are used: bins are bytes
    /// and one code marks missing values).
    pub max_bin: usize,
    /// `base_score`: the global bias, in prediction space. Default: estimated from the labels
    /// (their mean for `reg:squarederror` and `binary:logistic`; 0.5 for `multi:softprob`).
    pub base_score: Option<f32>,
    /// `seed`: for `subsample` and `colsample_bytree`. Default 0.
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            objective: Objective::SquaredError,
            max_depth: 6,
            max_leaves: 0,
            grow_policy: GrowPolicy::Depthwise,
            eta: 0.3,
            lambda: 1.0,
            alpha: 0.0,
            gamma: 0.0,
            min_child_weight: 1.0,
            subsample: 1.0,
            colsample_bytree: 1.0,
            max_bin: 256,
            base_score: None,
            seed: 0,
        }
    }
}

impl Params {
    /// Builds parameters from `(name, value)` pairs, XGBoost style:
    /// `Params::from_pairs(&[("objective", "binary:logistic"), ("max_depth", "4")])`.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Result<Self, MlError> {
        let mut p = Params::default();
        let objective = pairs.iter().find(|(k, _)| *k == "objective").map(|p| p.1);
        let num_class = pairs
            .iter()
            .find(|(k, _)| *k == "num_class")
            .map(|(_, v)| parse::<u32>("num_class", v))
            .transpose()?;
        if let Some(o) = objective {
            p.objective = Objective::parse(o, num_class)?;
        } else if num_class.is_some() {
            return Err(MlError::Param(
                "num_class is given but objective is not multi:softprob".into(),
            ));
        }
        for (k, v) in pairs {
            if *k != "objective" && *k != "num_class" {
                p.set(k, v)?;
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Sets one parameter by its XGBoost name (or alias).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), MlError> {
        match name {
            "objective" => {
                let n = match self.objective {
                    Objective::MultiSoftprob { num_class } => Some(num_class),
                    _ => None,
                };
                self.objective = Objective::parse(value, n)?;
            }
            "num_class" => {
                let n = parse::<u32>(name, value)?;
                self.objective = Objective::parse("multi:softprob", Some(n))?;
            }
            "max_depth" => self.max_depth = parse(name, value)?,
            "max_leaves" | "max_leaf_nodes" => self.max_leaves = parse(name, value)?,
            "grow_policy" => {
                self.grow_policy = match value.trim() {
                    "depthwise" => GrowPolicy::Depthwise,
                    "lossguide" => GrowPolicy::Lossguide,
                    other => {
                        return Err(MlError::Param(format!(
                            "grow_policy must be depthwise or lossguide, got {other:?}"
                        )))
                    }
                }
            }
            "eta" | "learning_rate" => self.eta = parse(name, value)?,
            "lambda" | "reg_lambda" => self.lambda = parse(name, value)?,
            "alpha" | "reg_alpha" => self.alpha = parse(name, value)?,
            "gamma" | "min_split_loss" => self.gamma = parse(name, value)?,
            "min_child_weight" => self.min_child_weight = parse(name, value)?,
            "subsample" => self.subsample = parse(name, value)?,
            "colsample_bytree" => self.colsample_bytree = parse(name, value)?,
            "max_bin" => self.max_bin = parse(name, value)?,
            "base_score" => self.base_score = Some(parse(name, value)?),
            "seed" | "random_state" => self.seed = parse(name, value)?,
            // Accepted for compatibility; Starling always trains with `hist` and sizes its
            // threads from `ScalingConfig`.
            "tree_method" if value == "hist" || value == "auto" => {}
            "nthread" | "n_jobs" | "verbosity" => {}
            other => {
                return Err(MlError::Param(format!(
                    "unknown or unsupported parameter {other:?}={value:?}"
                )))
            }
        }
        Ok(())
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), MlError> {
        let bad = |m: String| Err(MlError::Param(m));
        if self.max_depth > 30 {
            return bad(format!(
                "max_depth must be in 0..=30, got {}",
                self.max_depth
            ));
        }
        if self.max_depth == 0
            && (self.grow_policy != GrowPolicy::Lossguide || self.max_leaves == 0)
        {
            return bad(
                "max_depth 0 (no limit) needs grow_policy=lossguide and max_leaves > 0".into(),
            );
        }
        if self.max_leaves == 1 || self.max_leaves > MAX_LEAVES {
            return bad(format!(
                "max_leaves must be 0 (no limit) or in 2..={MAX_LEAVES}, got {}",
                self.max_leaves
            ));
        }
        if self.grow_policy == GrowPolicy::Lossguide && self.leaf_budget() > MAX_LEAVES {
            return bad(format!(
                "lossguide with max_depth {} and no max_leaves allows {} leaves; \
                 set max_leaves (at most {MAX_LEAVES})",
                self.max_depth,
                self.leaf_budget()
            ));
        }
        if !(self.eta > 0.0 && self.eta.is_finite()) {
            return bad(format!("eta must be > 0, got {}", self.eta));
        }
        if self.lambda < 0.0 || self.alpha < 0.0 || self.gamma < 0.0 || self.min_child_weight < 0.0
        {
            return bad("lambda, alpha, gamma and min_child_weight must be >= 0".into());
        }
        if !(self.subsample > 0.0 && self.subsample <= 1.0) {
            return bad(format!(
                "subsample must be in (0, 1], got {}",
                self.subsample
            ));
        }
        if !(self.colsample_bytree > 0.0 && self.colsample_bytree <= 1.0) {
            return bad(format!(
                "colsample_bytree must be in (0, 1], got {}",
                self.colsample_bytree
            ));
        }
        if self.max_bin < 2 {
            return bad(format!("max_bin must be >= 2, got {}", self.max_bin));
        }
        if let (Objective::BinaryLogistic, Some(b)) = (self.objective, self.base_score) {
            if !(b > 0.0 && b < 1.0) {
                return bad(format!(
                    "base_score must be in (0, 1) for binary:logistic, got {b}"
                ));
            }
        }
        Ok(())
    }
}

/// Most leaves a tree may be given (`max_leaves`).
pub const MAX_LEAVES: usize = 1 << 16;

/// How a tree grows (XGBoost's `grow_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GrowPolicy {
    /// Every node of a level before the next level.
    #[default]
    Depthwise,
    /// The leaf whose best split reduces the loss most, one at a time, up to `max_leaves`.
    Lossguide,
}

impl Params {
    /// Most leaves a tree can get from `max_leaves` and `max_depth` together.
    pub fn leaf_budget(&self) -> usize {
        let by_depth = (self.max_depth > 0).then(|| 1usize << self.max_depth);
        match (self.max_leaves, by_depth) {
            (0, Some(d)) => d,
            (l, Some(d)) => l.min(d),
            (l, None) => l,
        }
    }

    /// The depth whose full binary tree bounds what a shard keeps for one tree: its leaves
    /// (row groups) and the widest step's histograms. Depth-wise, `max_depth`; loss-guided,
    /// room for twice the leaf budget (a step may split leaves that are then not kept).
    pub(crate) fn capacity_depth(&self) -> u32 {
        match self.grow_policy {
            GrowPolicy::Depthwise => self.max_depth as u32,
            GrowPolicy::Lossguide => self.leaf_budget().next_power_of_two().trailing_zeros() + 2,
        }
    }
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, MlError> {
    value
        .trim()
        .parse()
        .map_err(|_| MlError::Param(format!("{name}: cannot read {value:?}")))
}

/// How training is spread: `num_workers` shards, each handled by tasks of
/// `num_cpu_per_worker` CPUs (XGBoost-on-Ray's `ScalingConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingConfig {
    /// Number of shards (and of tasks per step).
    pub num_workers: usize,
    /// CPUs each worker task takes (and threads it uses).
    pub num_cpu_per_worker: usize,
}

impl Default for ScalingConfig {
    fn default() -> Self {
        ScalingConfig {
            num_workers: 1,
            num_cpu_per_worker: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xgboost_names_aliases_and_defaults() {
        let p = Params::from_pairs(&[
            ("objective", "multi:softprob"),
            ("num_class", "3"),
            ("learning_rate", "0.1"),
            ("reg_lambda", "2"),
            ("tree_method", "hist"),
        ])
        .unwrap();
        assert_eq!(p.objective, Objective::MultiSoftprob { num_class: 3 });
        assert_eq!(p.eta, 0.1);
        assert_eq!(p.lambda, 2.0);
        assert_eq!(p.max_depth, 6);
        assert_eq!(p.max_bin, 256);
        assert_eq!(p.grow_policy, GrowPolicy::Depthwise);
        assert_eq!(p.max_leaves, 0);
        let p = Params::from_pairs(&[
            ("grow_policy", "lossguide"),
            ("max_leaves", "31"),
            ("max_depth", "0"),
        ])
        .unwrap();
        assert_eq!(p.grow_policy, GrowPolicy::Lossguide);
        assert_eq!((p.leaf_budget(), p.capacity_depth()), (31, 7));
    }

    #[test]
    fn bad_parameters_are_refused_with_their_name() {
        for (pairs, want) in [
            (vec![("max_depth", "x")], "max_depth"),
            (vec![("subsample", "0")], "subsample"),
            (vec![("objective", "rank:pairwise")], "unknown objective"),
            (vec![("objective", "multi:softprob")], "num_class"),
            (vec![("num_class", "3")], "num_class"),
            (vec![("tree_method", "exact")], "tree_method"),
            (vec![("booster", "dart")], "booster"),
            (vec![("max_depth", "0")], "lossguide"),
            (vec![("grow_policy", "leafwise")], "grow_policy"),
            (vec![("max_leaves", "1")], "max_leaves"),
            (
                vec![("grow_policy", "lossguide"), ("max_depth", "0")],
                "max_leaves > 0",
            ),
            (
                vec![("grow_policy", "lossguide"), ("max_depth", "24")],
                "set max_leaves",
            ),
        ] {
            let e = Params::from_pairs(&pairs).unwrap_err().to_string();
            assert!(e.contains(want), "{pairs:?}: {e}");
        }
    }
}
