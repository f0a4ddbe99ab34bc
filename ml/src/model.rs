//! A trained model: regression trees in XGBoost's layout, the objective that turns their summed
//! outputs into predictions, and feature importance.
//!
//! Trees are stored as parallel arrays, node 0 the root, exactly as XGBoost's JSON model keeps
//! them, so saving and loading (`xgb_json`) is a field-for-field copy. A row goes left at node
//! `i` when `x[split_index[i]] < split_condition[i]`, and a missing value (NaN) goes left when
//! `default_left[i]`. A leaf (`left[i] == -1`) holds its output, already multiplied by the
//! learning rate, in `split_condition[i]`.

use serde::{Deserialize, Serialize};

use crate::MlError;

/// What the model predicts and which loss it was trained on (XGBoost's `objective` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Objective {
    /// `reg:squarederror`: the prediction is the margin.
    SquaredError,
    /// `binary:logistic`: the prediction is `sigmoid(margin)`, labels are 0 or 1.
    BinaryLogistic,
    /// `multi:softprob`: one tree per class per round; the prediction is `softmax(margins)`,
    /// labels are class indices `0..num_class`.
    MultiSoftprob {
        /// Number of classes.
        num_class: u32,
    },
}

impl Objective {
    /// Parses XGBoost's name for an objective (`num_class` is needed by `multi:softprob`).
    pub fn parse(name: &str, num_class: Option<u32>) -> Result<Self, MlError> {
        match name {
            "reg:squarederror" => Ok(Objective::SquaredError),
            "binary:logistic" => Ok(Objective::BinaryLogistic),
            "multi:softprob" => match num_class {
                Some(n) if n >= 2 => Ok(Objective::MultiSoftprob { num_class: n }),
                Some(n) => Err(MlError::Param(format!(
                    "multi:softprob needs num_class >= 2, got {n}"
                ))),
                None => Err(MlError::Param("multi:softprob needs num_class".into())),
            },
            other => Err(MlError::Param(format!(
                "unknown objective {other:?} (supported: reg:squarederror, binary:logistic, multi:softprob)"
            ))),
        }
    }

    /// XGBoost's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Objective::SquaredError => "reg:squarederror",
            Objective::BinaryLogistic => "binary:logistic",
            Objective::MultiSoftprob { .. } => "multi:softprob",
        }
    }

    /// Margins per row: 1, or `num_class` for softprob.
    pub fn groups(&self) -> usize {
        match self {
            Objective::MultiSoftprob { num_class } => *num_class as usize,
            _ => 1,
        }
    }

    /// The margin that `base_score` (given in prediction space) stands for.
    pub fn base_margin(&self, base_score: f32) -> f32 {
        match self {
            Objective::BinaryLogistic => {
                let p = base_score.clamp(1e-7, 1.0 - 1e-7);
                (p / (1.0 - p)).ln()
            }
            _ => base_score,
        }
    }

    /// Turns one row's margins into predictions, in place.
    pub fn transform(&self, margins: &mut [f32]) {
        match self {
            Objective::SquaredError => {}
            Objective::BinaryLogistic => {
                for m in margins {
                    *m = sigmoid(*m);
                }
            }
            Objective::MultiSoftprob { .. } => softmax(margins),
        }
    }
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Softmax in place (shifted by the maximum, so large margins do not overflow).
pub fn softmax(v: &mut [f32]) {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// One regression tree, as parallel arrays indexed by node (node 0 is the root).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    /// Left child of each node, `-1` for a leaf.
    pub left: Vec<i32>,
    /// Right child of each node, `-1` for a leaf.
    pub right: Vec<i32>,
    /// Parent of each node (`i32::MAX` for the root, as XGBoost writes it).
    pub parent: Vec<i32>,
    /// Feature each split tests (0 for leaves).
    pub split_index: Vec<u32>,
    /// Threshold of each split (`x < threshold` goes left); a leaf's output for leaves.
    pub split_condition: Vec<f32>,
    /// Where a missing value goes at each split.
    pub default_left: Vec<bool>,
    /// Each node's weight `-G/(H+lambda)`, before the learning rate is applied.
    pub base_weight: Vec<f32>,
    /// Loss reduction of each split (0 for leaves).
    pub loss_change: Vec<f32>,
    /// Sum of the hessians of the training rows that reached each node.
    pub sum_hessian: Vec<f32>,
}

impl Tree {
    /// A tree with a single leaf.
    pub fn leaf(value: f32, sum_hessian: f32) -> Self {
        let mut t = Tree::default();
        t.push_node(-1, value, sum_hessian);
        t
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.left.len()
    }

    /// Whether the tree has no nodes (never true for a trained tree).
    pub fn is_empty(&self) -> bool {
        self.left.is_empty()
    }

    /// Whether node `i` is a leaf.
    pub fn is_leaf(&self, i: usize) -> bool {
        self.left[i] == -1
    }

    /// Appends a leaf under `parent` (or the root, for `-1`) and returns its index.
    pub fn push_node(&mut self, parent: i32, value: f32, sum_hessian: f32) -> usize {
        let i = self.left.len();
        self.left.push(-1);
        self.right.push(-1);
        self.parent.push(if parent < 0 { i32::MAX } else { parent });
        self.split_index.push(0);
        self.split_condition.push(value);
        self.default_left.push(false);
        self.base_weight.push(value);
        self.loss_change.push(0.0);
        self.sum_hessian.push(sum_hessian);
        i
    }

    /// Turns leaf `i` into a split with two new leaves; returns their indices.
    #[allow(clippy::too_many_arguments)]
    pub fn split(
        &mut self,
        i: usize,
        feature: u32,
        threshold: f32,
        default_left: bool,
        loss_change: f32,
        left: (f32, f32),
        right: (f32, f32),
    ) -> (usize, usize) {
        let l = self.push_node(i as i32, left.0, left.1);
        let r = self.push_node(i as i32, right.0, right.1);
        self.left[i] = l as i32;
        self.right[i] = r as i32;
        self.split_index[i] = feature;
        self.split_condition[i] = threshold;
        self.default_left[i] = default_left;
        self.loss_change[i] = loss_change;
        (l, r)
    }

    /// The leaf `row` (one value per feature, NaN for missing) ends in.
    #[inline]
    pub fn leaf_of(&self, row: &[f32]) -> usize {
        let mut i = 0usize;
        while self.left[i] != -1 {
            let x = row[self.split_index[i] as usize];
            let go_left = if x.is_nan() {
                self.default_left[i]
            } else {
                x < self.split_condition[i]
            };
            i = if go_left { self.left[i] } else { self.right[i] } as usize;
        }
        i
    }

    /// This tree's output for `row`.
    #[inline]
    pub fn predict_row(&self, row: &[f32]) -> f32 {
        self.split_condition[self.leaf_of(row)]
    }

    /// Depth of the deepest leaf (a single leaf has depth 0).
    pub fn depth(&self) -> usize {
        fn walk(t: &Tree, i: usize) -> usize {
            if t.is_leaf(i) {
                0
            } else {
                1 + walk(t, t.left[i] as usize).max(walk(t, t.right[i] as usize))
            }
        }
        if self.is_empty() {
            0
        } else {
            walk(self, 0)
        }
    }
}

/// Which importance [`Model::feature_importance`] reports (XGBoost's `importance_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportanceType {
    /// How many splits use the feature.
    Weight,
    /// Average loss reduction of the splits that use the feature.
    Gain,
    /// Total loss reduction of the splits that use the feature.
    TotalGain,
}

/// A trained gradient-boosted-trees model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The training objective.
    pub objective: Objective,
    /// The global bias in prediction space (a probability for `binary:logistic`).
    pub base_score: f32,
    /// Number of input features.
    pub num_feature: usize,
    /// Input column names, in feature order (may be empty for a loaded model without names).
    pub feature_names: Vec<String>,
    /// The trees, in the order they were grown (round by round; class by class within a round).
    pub trees: Vec<Tree>,
    /// The class (output group) of each tree.
    pub tree_info: Vec<u32>,
    /// The best round on the eval set when training stopped early (predictions use rounds
    /// `0..=best_iteration`), `None` when every round counts.
    pub best_iteration: Option<usize>,
}

impl Model {
    /// Number of boosting rounds (trees per class).
    pub fn num_rounds(&self) -> usize {
        self.trees.len() / self.objective.groups().max(1)
    }

    /// How many trees predictions use (all, or those up to the best round).
    fn trees_used(&self) -> usize {
        match self.best_iteration {
            Some(b) => ((b + 1) * self.objective.groups()).min(self.trees.len()),
            None => self.trees.len(),
        }
    }

    /// Raw margins for one row (one per class), added into `out`.
    pub fn margins_row(&self, row: &[f32], out: &mut [f32]) {
        let base = self.objective.base_margin(self.base_score);
        out.iter_mut().for_each(|m| *m = base);
        for (tree, class) in self.trees[..self.trees_used()].iter().zip(&self.tree_info) {
            out[*class as usize] += tree.predict_row(row);
        }
    }

    /// Predictions for rows given row-major (`rows.len() == n * num_feature`): one value per
    /// row, or `num_class` probabilities per row for `multi:softprob` (row-major).
    pub fn predict_rows(&self, rows: &[f32]) -> Result<Vec<f32>, MlError> {
        let f = self.num_feature.max(1);
        if !rows.len().is_multiple_of(f) {
            return Err(MlError::Shape(format!(
                "{} values is not a whole number of rows of {} features",
                rows.len(),
                self.num_feature
            )));
        }
        let g = self.objective.groups();
        let n = rows.len() / f;
        let mut out = vec![0f32; n * g];
        for (row, o) in rows.chunks_exact(f).zip(out.chunks_exact_mut(g)) {
            self.margins_row(row, o);
            self.objective.transform(o);
        }
        Ok(out)
    }

    /// Importance of each feature, by name (or `f<index>` without names); features no split
    /// uses are left out, as XGBoost does.
    pub fn feature_importance(&self, kind: ImportanceType) -> Vec<(String, f64)> {
        let mut count = vec![0u64; self.num_feature];
        let mut gain = vec![0f64; self.num_feature];
        for t in &self.trees[..self.trees_used()] {
            for i in 0..t.len() {
                if !t.is_leaf(i) {
                    let f = t.split_index[i] as usize;
                    if f < self.num_feature {
                        count[f] += 1;
                        gain[f] += f64::from(t.loss_change[i]);
                    }
                }
            }
        }
        (0..self.num_feature)
            .filter(|&f| count[f] > 0)
            .map(|f| {
                let name = self
                    .feature_names
                    .get(f)
                    .cloned()
                    .unwrap_or_else(|| format!("f{f}"));
                let v = match kind {
                    ImportanceType::Weight => count[f] as f64,
                    ImportanceType::Gain => gain[f] / count[f] as f64,
                    ImportanceType::TotalGain => gain[f],
                };
                (name, v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stump() -> Tree {
        let mut t = Tree::leaf(0.0, 4.0);
        t.split(0, 1, 2.5, true, 3.0, (-1.0, 2.0), (1.0, 2.0));
        t
    }

    #[test]
    fn rows_follow_thresholds_and_missing_values_the_default() {
        let t = stump();
        assert_eq!(t.predict_row(&[9.0, 2.0]), -1.0);
        assert_eq!(
            t.predict_row(&[9.0, 2.5]),
            1.0,
            "equal to the threshold goes right"
        );
        assert_eq!(t.predict_row(&[9.0, f32::NAN]), -1.0);
        assert_eq!(t.depth(), 1);
        assert_eq!(t.parent, vec![i32::MAX, 0, 0]);
    }

    #[test]
    fn logistic_models_add_the_base_margin_and_squash() {
        let m = Model {
            objective: Objective::BinaryLogistic,
            base_score: 0.5,
            num_feature: 2,
            feature_names: vec!["a".into(), "b".into()],
            trees: vec![stump(), stump()],
            tree_info: vec![0, 0],
            best_iteration: None,
        };
        let p = m.predict_rows(&[0.0, 0.0, 0.0, 5.0]).unwrap();
        assert!((p[0] - sigmoid(-2.0)).abs() < 1e-6);
        assert!((p[1] - sigmoid(2.0)).abs() < 1e-6);
        let mut early = m.clone();
        early.best_iteration = Some(0);
        assert!((early.predict_rows(&[0.0, 0.0]).unwrap()[0] - sigmoid(-1.0)).abs() < 1e-6);
        assert_eq!(
            m.feature_importance(ImportanceType::Weight),
            vec![("b".to_string(), 2.0)]
        );
        assert_eq!(
            m.feature_importance(ImportanceType::Gain),
            vec![("b".to_string(), 3.0)]
        );
        assert!(m.predict_rows(&[1.0, 2.0, 3.0]).is_err());
    }
}
