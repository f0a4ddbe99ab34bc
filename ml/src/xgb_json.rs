//! XGBoost's JSON model format.
//!
//! [`Model::save_json`] writes a file that XGBoost 2.x and 3.x load with
//! `xgboost.Booster(model_file="m.json")` and predict with exactly as
//! [`Model::predict_rows`] does; [`Model::load_json`] reads the `gbtree` models that XGBoost
//! 2.x and 3.x write with `Booster.save_model("m.json")`. [`Model::to_json_string`] and
//! [`Model::from_json_str`] do the same in memory.
//!
//! # Layout
//!
//! ```text
//! {"version": [3, 0, 0],
//!  "learner": {
//!   "attributes": {"best_iteration": "7"},
//!   "feature_names": ["age", "income"], "feature_types": [],
//!   "learner_model_param": {"base_score": "5E-1", "boost_from_average": "1",
//!                           "num_class": "0", "num_feature": "2", "num_target": "1"},
//!   "objective": {"name": "binary:logistic", "reg_loss_param": {"scale_pos_weight": "1"}},
//!   "gradient_booster": {"name": "gbtree", "model": {
//!     "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": "2"},
//!     "iteration_indptr": [0, 1, 2], "tree_info": [0, 0],
//!     "trees": [{"id": 0,
//!                "tree_param": {"num_deleted": "0", "num_feature": "2", "num_nodes": "3",
//!                               "size_leaf_vector": "1"},
//!                "left_children": [1, -1, -1], "right_children": [2, -1, -1],
//!                "parents": [2147483647, 0, 0], "split_indices": [1, 0, 0],
//!                "split_conditions": [2.5, -0.4, 0.6], "default_left": [1, 0, 0],
//!                "split_type": [0, 0, 0], "base_weights": [...], "loss_changes": [...],
//!                "sum_hessian": [...], "categories": [], "categories_nodes": [],
//!                "categories_segments": [], "categories_sizes": []}, ...]}}}}
//! ```
//!
//! The facts this module relies on (checked against XGBoost's loader, `RegTree::LoadModel`,
//! `GBTreeModel::LoadModel` and the learner's model parameters):
//!
//! - Parameters (`learner_model_param`, `tree_param`, `gbtree_model_param`, the objective's
//!   parameters) and attributes are JSON strings, even when they hold numbers.
//! - `base_score` is in prediction space (a probability for `binary:logistic`; the loader
//!   turns it into a margin). XGBoost 2.x and 3.0 write a scalar (`"5E-1"`); 3.1 and later
//!   write a list (`"[5E-1]"`), with one entry per class for multi-class models. Every 2.x and
//!   3.x loader accepts the scalar form, so that is what is written, with `version` `[3, 0, 0]`
//!   (3.0 being the last release to write it); both forms are read. A multi-class model whose classes
//!   have different intercepts is read by adding each class's intercept, less the first
//!   class's, to every leaf of that class's first tree: the margins are the same, and
//!   [`Model::base_score`] holds the first class's intercept.
//! - A leaf's output is its `split_conditions` entry; `left_children` is `-1` at a leaf. The
//!   root's parent is written as `2147483647` (`-1` is read too). `default_left` is `0`/`1`.
//! - XGBoost's reader takes a number without `.` or an exponent as an integer and refuses it
//!   where a float is expected, so floats are always written with one (`1.0`, `5e-8`).
//!   Non-finite values cannot be written.
//! - A node XGBoost's pruner deleted keeps its slot, with split index `2147483647` and
//!   `default_left` `1`; `num_deleted` counts them.
//! - `tree_info` gives each tree's class; `iteration_indptr` the first tree of each round.
//! - `best_iteration` is kept as the learner attribute of that name. Python's
//!   `Booster.predict` uses every tree unless given `iteration_range=(0, best_iteration + 1)`;
//!   XGBoost's scikit-learn wrapper passes that, as [`Model::predict_rows`] does.
//!
//! Reading refuses, with [`MlError::Format`]: the `dart` and `gblinear` boosters (and DART
//! dropout weights), objectives other than `reg:squarederror`, `binary:logistic` and
//! `multi:softprob`, categorical splits and features, vector leaves (multi-target trees),
//! boosted random forests (`num_parallel_tree` > 1), and trees that are not well formed.
//! Other learner attributes (such as `best_score`) are not kept.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::{MlError, Model, Objective, Tree};

/// The `version` written into saved models.
pub const FORMAT_VERSION: [u32; 3] = [3, 0, 0];

/// The parent XGBoost writes for the root node.
pub const ROOT_PARENT: i32 = i32::MAX;

/// The split index XGBoost writes for a node its pruner deleted (with `default_left` set).
pub const DELETED_SPLIT_INDEX: u32 = 0x7FFF_FFFF;

/// What a model parsed from memory is called in error messages.
const IN_MEMORY: &str = "XGBoost JSON model";

impl Model {
    /// Writes the model to `path` in XGBoost's JSON model format (see the [module
    /// docs](crate::xgb_json)).
    ///
    /// Fails with [`MlError::Format`] when the model cannot be written as XGBoost reads it
    /// (non-finite numbers, a malformed tree, counts that disagree) and [`MlError::Io`] when
    /// the file cannot be written.
    pub fn save_json(&self, path: impl AsRef<Path>) -> Result<(), MlError> {
        let path = path.as_ref();
        let text = self.render_json(&path.display().to_string())?;
        std::fs::write(path, text).map_err(|source| MlError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads a model that XGBoost (2.x or 3.x) saved as JSON, or that [`Model::save_json`]
    /// wrote.
    ///
    /// Fails with [`MlError::Io`] when the file cannot be read and [`MlError::Format`], naming
    /// the JSON path of the problem, when it is not such a model or uses what this crate does
    /// not support (see the [module docs](crate::xgb_json)).
    pub fn load_json(path: impl AsRef<Path>) -> Result<Model, MlError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| MlError::Io {
            path: origin.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            format_error(
                &origin,
                "not UTF-8 text, so not a JSON model (XGBoost writes its binary UBJSON format \
                 unless the file name ends in .json)",
            )
        })?;
        parse_model(&text, &origin)
    }

    /// The model in XGBoost's JSON model format, as [`Model::save_json`] writes it.
    pub fn to_json_string(&self) -> Result<String, MlError> {
        self.render_json(IN_MEMORY)
    }

    /// Parses a model in XGBoost's JSON model format.
    pub fn from_json_str(text: &str) -> Result<Model, MlError> {
        parse_model(text, IN_MEMORY)
    }

    fn render_json(&self, origin: &str) -> Result<String, MlError> {
        check_model(self).map_err(|m| format_error(origin, format!("cannot save: {m}")))?;
        serde_json::to_string(&JsonModel::new(self))
            .map_err(|e| format_error(origin, format!("cannot save: {e}")))
    }
}

fn format_error(origin: &str, message: impl Into<String>) -> MlError {
    MlError::Format {
        path: origin.to_string(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by saving and loading.

/// Checks what prediction and XGBoost's loader rely on: consistent counts, classes in range,
/// finite numbers, and well-formed trees.
fn check_model(m: &Model) -> Result<(), String> {
    let groups = m.objective.groups();
    if let Objective::MultiSoftprob { num_class } = m.objective {
        if num_class < 2 {
            return Err(format!(
                "multi:softprob needs num_class >= 2, got {num_class}"
            ));
        }
    }
    if !m.base_score.is_finite() {
        return Err(format!("base_score is {}", m.base_score));
    }
    if m.objective == Objective::BinaryLogistic && !(m.base_score > 0.0 && m.base_score < 1.0) {
        return Err(format!(
            "base_score {} is not a probability strictly between 0 and 1, as binary:logistic \
             needs",
            m.base_score
        ));
    }
    if !m.feature_names.is_empty() && m.feature_names.len() != m.num_feature {
        return Err(format!(
            "{} feature names for {} features",
            m.feature_names.len(),
            m.num_feature
        ));
    }
    if m.tree_info.len() != m.trees.len() {
        return Err(format!(
            "tree_info has {} entries for {} trees",
            m.tree_info.len(),
            m.trees.len()
        ));
    }
    if !m.trees.len().is_multiple_of(groups) {
        return Err(format!(
            "{} trees is not a whole number of rounds of {groups} (one tree per class)",
            m.trees.len()
        ));
    }
    if let Some(i) = m.tree_info.iter().position(|&c| c as usize >= groups) {
        return Err(format!(
            "tree {i} is for class {} but the model has {groups} output(s)",
            m.tree_info[i]
        ));
    }
    for (i, t) in m.trees.iter().enumerate() {
        check_tree(t, m.num_feature).map_err(|e| format!("tree {i}: {e}"))?;
    }
    Ok(())
}

/// Checks one tree: equal array lengths, parents in range, children that form a tree below
/// the root, split features below `num_feature`, finite numbers.
fn check_tree(t: &Tree, num_feature: usize) -> Result<(), String> {
    let n = t.len();
    if n == 0 {
        return Err("no nodes".into());
    }
    if n > i32::MAX as usize {
        return Err(format!("{n} nodes (at most {} allowed)", i32::MAX));
    }
    let lengths = [
        ("right_children", t.right.len()),
        ("parents", t.parent.len()),
        ("split_indices", t.split_index.len()),
        ("split_conditions", t.split_condition.len()),
        ("default_left", t.default_left.len()),
        ("base_weights", t.base_weight.len()),
        ("loss_changes", t.loss_change.len()),
        ("sum_hessian", t.sum_hessian.len()),
    ];
    for (name, len) in lengths {
        if len != n {
            return Err(format!("{name} has {len} entries, left_children {n}"));
        }
    }
    let floats = [
        ("split_conditions", &t.split_condition),
        ("base_weights", &t.base_weight),
        ("loss_changes", &t.loss_change),
        ("sum_hessian", &t.sum_hessian),
    ];
    for (name, values) in floats {
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("node {i}: {name} is {}", values[i]));
        }
    }
    if t.parent[0] != ROOT_PARENT && t.parent[0] != -1 {
        return Err(format!(
            "the root's parent is {}, not {ROOT_PARENT} (or -1)",
            t.parent[0]
        ));
    }
    if let Some(i) = (1..n).find(|&i| t.parent[i] < 0 || t.parent[i] as usize >= n) {
        return Err(format!("node {i}: parent {} is not a node", t.parent[i]));
    }
    // Walk from the root: every split has two children, each reached once, that name it as
    // their parent, so prediction ends at a leaf.
    let mut seen = vec![false; n];
    seen[0] = true;
    let mut stack = vec![0usize];
    while let Some(i) = stack.pop() {
        if t.left[i] == -1 {
            continue;
        }
        for (side, child) in [("left", t.left[i]), ("right", t.right[i])] {
            if child < 1 || child as usize >= n {
                return Err(format!("node {i}: {side} child {child} is not a node"));
            }
            let c = child as usize;
            if seen[c] {
                return Err(format!("node {c} is reached twice"));
            }
            if t.parent[c] as usize != i {
                return Err(format!(
                    "node {c}: parent is {}, but it is node {i}'s {side} child",
                    t.parent[c]
                ));
            }
            seen[c] = true;
            stack.push(c);
        }
        if t.split_index[i] as usize >= num_feature {
            return Err(format!(
                "node {i} splits on feature {} but the model has {num_feature} features",
                t.split_index[i]
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writing. Field names and order follow what XGBoost writes (its objects are sorted by key).

#[derive(Serialize)]
struct JsonModel<'a> {
    learner: JsonLearner<'a>,
    version: [u32; 3],
}

#[derive(Serialize)]
struct JsonLearner<'a> {
    attributes: BTreeMap<&'static str, String>,
    feature_names: &'a [String],
    feature_types: &'static [&'static str],
    gradient_booster: JsonBooster<'a>,
    learner_model_param: BTreeMap<&'static str, String>,
    objective: Value,
}

#[derive(Serialize)]
struct JsonBooster<'a> {
    model: JsonGbtree<'a>,
    name: &'static str,
}

#[derive(Serialize)]
struct JsonGbtree<'a> {
    gbtree_model_param: BTreeMap<&'static str, String>,
    iteration_indptr: Vec<usize>,
    tree_info: &'a [u32],
    trees: Vec<JsonTree<'a>>,
}

#[derive(Serialize)]
struct JsonTree<'a> {
    base_weights: &'a [f32],
    categories: &'static [i32],
    categories_nodes: &'static [i32],
    categories_segments: &'static [i64],
    categories_sizes: &'static [i64],
    default_left: Vec<u8>,
    id: usize,
    left_children: &'a [i32],
    loss_changes: &'a [f32],
    parents: &'a [i32],
    right_children: &'a [i32],
    split_conditions: &'a [f32],
    split_indices: &'a [u32],
    split_type: Vec<u8>,
    sum_hessian: &'a [f32],
    tree_param: BTreeMap<&'static str, String>,
}

impl<'a> JsonModel<'a> {
    fn new(m: &'a Model) -> Self {
        let groups = m.objective.groups();
        let num_class = match m.objective {
            Objective::MultiSoftprob { num_class } => num_class,
            _ => 0,
        };
        let objective = match m.objective {
            Objective::SquaredError | Objective::BinaryLogistic => json!({
                "name": m.objective.name(),
                "reg_loss_param": {"scale_pos_weight": "1"},
            }),
            Objective::MultiSoftprob { num_class } => json!({
                "name": m.objective.name(),
                "softmax_multiclass_param": {"num_class": num_class.to_string()},
            }),
        };
        let mut attributes = BTreeMap::new();
        if let Some(best) = m.best_iteration {
            attributes.insert("best_iteration", best.to_string());
        }
        let learner_model_param = BTreeMap::from([
            // XGBoost's own float notation (shortest round trip, exponent form): "5E-1".
            ("base_score", format!("{:E}", m.base_score)),
            ("boost_from_average", "1".to_string()),
            ("num_class", num_class.to_string()),
            ("num_feature", m.num_feature.to_string()),
            ("num_target", "1".to_string()),
        ]);
        let trees = m
            .trees
            .iter()
            .enumerate()
            .map(|(id, t)| JsonTree::new(id, t, m.num_feature))
            .collect();
        JsonModel {
            learner: JsonLearner {
                attributes,
                feature_names: &m.feature_names,
                feature_types: &[],
                gradient_booster: JsonBooster {
                    model: JsonGbtree {
                        gbtree_model_param: BTreeMap::from([
                            ("num_parallel_tree", "1".to_string()),
                            ("num_trees", m.trees.len().to_string()),
                        ]),
                        iteration_indptr: (0..=m.trees.len()).step_by(groups).collect(),
                        tree_info: &m.tree_info,
                        trees,
                    },
                    name: "gbtree",
                },
                learner_model_param,
                objective,
            },
            version: FORMAT_VERSION,
        }
    }
}

impl<'a> JsonTree<'a> {
    fn new(id: usize, t: &'a Tree, num_feature: usize) -> Self {
        let n = t.len();
        let num_deleted = (1..n)
            .filter(|&i| t.split_index[i] == DELETED_SPLIT_INDEX && t.default_left[i])
            .count();
        JsonTree {
            base_weights: &t.base_weight,
            categories: &[],
            categories_nodes: &[],
            categories_segments: &[],
            categories_sizes: &[],
            default_left: t.default_left.iter().map(|&d| u8::from(d)).collect(),
            id,
            left_children: &t.left,
            loss_changes: &t.loss_change,
            parents: &t.parent,
            right_children: &t.right,
            split_conditions: &t.split_condition,
            split_indices: &t.split_index,
            split_type: vec![0; n],
            sum_hessian: &t.sum_hessian,
            tree_param: BTreeMap::from([
                ("num_deleted", num_deleted.to_string()),
                ("num_feature", num_feature.to_string()),
                ("num_nodes", n.to_string()),
                ("size_leaf_vector", "1".to_string()),
            ]),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Reads typed values out of a parsed document, naming the JSON path of what is wrong.
struct Reader<'o> {
    origin: &'o str,
}

type Obj = Map<String, Value>;

/// The JSON path of `key` inside `at` (`at` empty for the document itself).
fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Reader<'_> {
    fn err(&self, message: impl Into<String>) -> MlError {
        format_error(self.origin, message)
    }

    fn wrong(&self, at: &str, expected: &str, found: &Value) -> MlError {
        self.err(format!(
            "{at}: expected {expected}, found {}",
            describe(found)
        ))
    }

    fn object<'v>(&self, v: &'v Value, at: &str) -> Result<&'v Obj, MlError> {
        v.as_object().ok_or_else(|| self.wrong(at, "an object", v))
    }

    fn field<'v>(&self, obj: &'v Obj, at: &str, key: &str) -> Result<&'v Value, MlError> {
        obj.get(key)
            .ok_or_else(|| self.err(format!("missing field `{}`", join(at, key))))
    }

    fn object_field<'v>(&self, obj: &'v Obj, at: &str, key: &str) -> Result<&'v Obj, MlError> {
        self.object(self.field(obj, at, key)?, &join(at, key))
    }

    fn str_field<'v>(&self, obj: &'v Obj, at: &str, key: &str) -> Result<&'v str, MlError> {
        let v = self.field(obj, at, key)?;
        v.as_str()
            .ok_or_else(|| self.wrong(&join(at, key), "a string", v))
    }

    /// A non-negative integer parameter: XGBoost writes them as strings (`"3"`); a JSON
    /// integer is accepted too.
    fn count_param(&self, obj: &Obj, at: &str, key: &str) -> Result<u64, MlError> {
        let v = self.field(obj, at, key)?;
        let at = format!("{at}.{key}");
        match v {
            Value::String(s) => s
                .trim()
                .parse::<u64>()
                .map_err(|_| self.err(format!("{at}: {s:?} is not a non-negative integer"))),
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| self.err(format!("{at}: {n} is not a non-negative integer"))),
            other => Err(self.wrong(&at, "a string holding an integer", other)),
        }
    }

    fn array<'v>(&self, obj: &'v Obj, at: &str, key: &str) -> Result<&'v [Value], MlError> {
        let v = self.field(obj, at, key)?;
        v.as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| self.wrong(&format!("{at}.{key}"), "an array", v))
    }

    fn f32s(&self, obj: &Obj, at: &str, key: &str) -> Result<Vec<f32>, MlError> {
        self.array(obj, at, key)?
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_f64() {
                Some(x) if (x as f32).is_finite() => Ok(x as f32),
                Some(x) => Err(self.err(format!("{at}.{key}[{i}]: {x} is not a finite f32"))),
                None => Err(self.wrong(&format!("{at}.{key}[{i}]"), "a number", v)),
            })
            .collect()
    }

    fn ints<T: TryFrom<i64>>(&self, obj: &Obj, at: &str, key: &str) -> Result<Vec<T>, MlError> {
        self.array(obj, at, key)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_i64()
                    .and_then(|x| T::try_from(x).ok())
                    .ok_or_else(|| match v {
                        Value::Number(n) => {
                            self.err(format!("{at}.{key}[{i}]: {n} is out of range"))
                        }
                        _ => self.wrong(&format!("{at}.{key}[{i}]"), "an integer", v),
                    })
            })
            .collect()
    }

    /// `0`/`1` (as XGBoost writes them) or booleans.
    fn flags(&self, obj: &Obj, at: &str, key: &str) -> Result<Vec<bool>, MlError> {
        self.array(obj, at, key)?
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Bool(b) => Ok(*b),
                Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
                Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
                _ => Err(self.wrong(&format!("{at}.{key}[{i}]"), "0 or 1", v)),
            })
            .collect()
    }
}

/// Parses `base_score`: a float (`"5E-1"`) or a list of them (`"[5E-1]"`, `"[1E-1,2E-1]"`).
fn parse_base_score(text: &str) -> Option<Vec<f32>> {
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .or_else(|| t.strip_prefix('(').and_then(|s| s.strip_suffix(')')));
    let values: Option<Vec<f32>> = match inner {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().parse::<f32>().ok())
            .collect(),
        None => t.parse::<f32>().ok().map(|v| vec![v]),
    };
    values.filter(|v| !v.is_empty() && v.iter().all(|x| x.is_finite()))
}

fn parse_model(text: &str, origin: &str) -> Result<Model, MlError> {
    let r = Reader { origin };
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| r.err(format!("not a JSON model: invalid JSON: {e}")))?;
    let root = r.object(&doc, "the document")?;
    if let Some(v) = root.get("version") {
        let ok = v
            .as_array()
            .is_some_and(|a| a.len() == 3 && a.iter().all(|x| x.as_u64().is_some()));
        if !ok {
            return Err(r.err(format!(
                "version: expected [major, minor, patch], found {v}"
            )));
        }
    }
    let learner = r.object_field(root, "", "learner")?;
    let at = "learner";

    // The booster first: a DART or linear model fails here, whatever else it holds.
    let booster = r.object_field(learner, at, "gradient_booster")?;
    let booster_at = "learner.gradient_booster";
    match r.str_field(booster, booster_at, "name")? {
        "gbtree" => {}
        "dart" => {
            return Err(r.err(
                "booster \"dart\" is not supported (only \"gbtree\"): DART scales each tree by \
                 a dropout weight",
            ))
        }
        "gblinear" => {
            return Err(r.err(
                "booster \"gblinear\" is not supported (only \"gbtree\"): it is a linear model, \
                 not trees",
            ))
        }
        other => {
            return Err(r.err(format!(
                "booster {other:?} is not supported (only \"gbtree\")"
            )))
        }
    }
    if let Some(w) = booster.get("weight_drop") {
        check_no_dropout(&r, w, &format!("{booster_at}.weight_drop"))?;
    }

    // Global parameters.
    let param_at = "learner.learner_model_param";
    let params = r.object_field(learner, at, "learner_model_param")?;
    let num_feature = r.count_param(params, param_at, "num_feature")?;
    let num_feature = usize::try_from(num_feature)
        .ok()
        .filter(|&n| n <= u32::MAX as usize)
        .ok_or_else(|| {
            r.err(format!(
                "{param_at}.num_feature: {num_feature} is too large"
            ))
        })?;
    let num_class = match params.get("num_class") {
        Some(_) => r.count_param(params, param_at, "num_class")?,
        None => 0,
    };
    if params.contains_key("num_target") {
        let targets = r.count_param(params, param_at, "num_target")?;
        if targets > 1 {
            return Err(r.err(format!(
                "{param_at}.num_target is {targets}: multi-target models are not supported"
            )));
        }
    }
    let base_text = r.str_field(params, param_at, "base_score")?;
    let base_scores = parse_base_score(base_text).ok_or_else(|| {
        r.err(format!(
            "{param_at}.base_score: {base_text:?} is not a finite number or a list of them"
        ))
    })?;

    // The objective.
    let objective_at = "learner.objective";
    let objective_json = r.object_field(learner, at, "objective")?;
    let name = r.str_field(objective_json, objective_at, "name")?;
    let objective = match name {
        "reg:squarederror" => Objective::SquaredError,
        "binary:logistic" => Objective::BinaryLogistic,
        "multi:softprob" => {
            let mut n = num_class;
            if n == 0 {
                if let Some(p) = objective_json.get("softmax_multiclass_param") {
                    let p = r.object(p, &format!("{objective_at}.softmax_multiclass_param"))?;
                    n = r.count_param(
                        p,
                        &format!("{objective_at}.softmax_multiclass_param"),
                        "num_class",
                    )?;
                }
            }
            let n = u32::try_from(n)
                .ok()
                .filter(|&n| n >= 2)
                .ok_or_else(|| r.err(format!("multi:softprob with num_class {n} (needs >= 2)")))?;
            Objective::MultiSoftprob { num_class: n }
        }
        other => {
            return Err(r.err(format!(
                "objective {other:?} is not supported (supported: reg:squarederror, \
                 binary:logistic, multi:softprob)"
            )))
        }
    };
    let groups = objective.groups();
    if groups == 1 && num_class > 1 {
        return Err(r.err(format!(
            "{param_at}.num_class is {num_class}, but objective {name} has one output"
        )));
    }
    if base_scores.len() != 1 && base_scores.len() != groups {
        return Err(r.err(format!(
            "{param_at}.base_score has {} values for {groups} output(s)",
            base_scores.len()
        )));
    }

    // Feature names and types.
    let mut feature_names = Vec::new();
    if let Some(v) = learner.get("feature_names") {
        let names_at = "learner.feature_names";
        let names = v
            .as_array()
            .ok_or_else(|| r.wrong(names_at, "an array", v))?;
        for (i, n) in names.iter().enumerate() {
            let s = n
                .as_str()
                .ok_or_else(|| r.wrong(&format!("{names_at}[{i}]"), "a string", n))?;
            feature_names.push(s.to_string());
        }
    }
    if let Some(v) = learner.get("feature_types") {
        let types_at = "learner.feature_types";
        let types = v
            .as_array()
            .ok_or_else(|| r.wrong(types_at, "an array", v))?;
        for (i, t) in types.iter().enumerate() {
            let t = t
                .as_str()
                .ok_or_else(|| r.wrong(&format!("{types_at}[{i}]"), "a string", t))?;
            if t == "c" {
                let name = feature_names
                    .get(i)
                    .map_or(String::new(), |n| format!(" ({n:?})"));
                return Err(r.err(format!(
                    "feature {i}{name} is categorical: categorical features are not supported"
                )));
            }
        }
    }

    // Attributes.
    let mut best_iteration = None;
    if let Some(v) = learner.get("attributes") {
        let attributes = r.object(v, "learner.attributes")?;
        if let Some(b) = attributes.get("best_iteration") {
            let b_at = "learner.attributes.best_iteration";
            let parsed = match b {
                Value::String(s) => s.trim().parse::<usize>().ok(),
                Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
                _ => None,
            };
            best_iteration = Some(
                parsed
                    .ok_or_else(|| r.err(format!("{b_at}: expected a round number, found {b}")))?,
            );
        }
    }

    // The trees.
    let gbtree_at = "learner.gradient_booster.model";
    let gbtree = r.object_field(booster, booster_at, "model")?;
    if let Some(w) = gbtree.get("weight_drop") {
        check_no_dropout(&r, w, &format!("{gbtree_at}.weight_drop"))?;
    }
    let gparam_at = "learner.gradient_booster.model.gbtree_model_param";
    let gparam = r.object_field(gbtree, gbtree_at, "gbtree_model_param")?;
    let num_trees = r.count_param(gparam, gparam_at, "num_trees")?;
    if gparam.contains_key("num_parallel_tree") {
        let parallel = r.count_param(gparam, gparam_at, "num_parallel_tree")?;
        if parallel > 1 {
            return Err(r.err(format!(
                "{gparam_at}.num_parallel_tree is {parallel}: boosted random forests are not \
                 supported"
            )));
        }
    }
    let trees_json = r.array(gbtree, gbtree_at, "trees")?;
    if trees_json.len() as u64 != num_trees {
        return Err(r.err(format!(
            "{gparam_at}.num_trees is {num_trees}, but there are {} trees",
            trees_json.len()
        )));
    }
    let tree_info: Vec<u32> = r.ints(gbtree, gbtree_at, "tree_info")?;
    if tree_info.len() != trees_json.len() {
        return Err(r.err(format!(
            "{gbtree_at}.tree_info has {} entries for {} trees",
            tree_info.len(),
            trees_json.len()
        )));
    }
    if !trees_json.len().is_multiple_of(groups) {
        return Err(r.err(format!(
            "{} trees is not a whole number of rounds of {groups} (one tree per class)",
            trees_json.len()
        )));
    }
    if let Some(i) = tree_info.iter().position(|&c| c as usize >= groups) {
        return Err(r.err(format!(
            "{gbtree_at}.tree_info[{i}]: class {} but the model has {groups} output(s)",
            tree_info[i]
        )));
    }
    if gbtree.contains_key("iteration_indptr") {
        let indptr: Vec<u64> = r.ints(gbtree, gbtree_at, "iteration_indptr")?;
        let expected: Vec<u64> = (0..=trees_json.len())
            .step_by(groups)
            .map(|i| i as u64)
            .collect();
        if indptr != expected {
            return Err(r.err(format!(
                "{gbtree_at}.iteration_indptr is {indptr:?}: expected one tree per class per \
                 round, {expected:?}"
            )));
        }
    }
    let mut trees = Vec::with_capacity(trees_json.len());
    for (i, tj) in trees_json.iter().enumerate() {
        let tree_at = format!("{gbtree_at}.trees[{i}]");
        trees.push(read_tree(&r, tj, &tree_at, i, num_feature)?);
    }

    // Per-class intercepts (XGBoost 3.1 and later, multi-class): fold the differences into
    // each class's first tree.
    let base_score = base_scores[0];
    if base_scores.iter().any(|&b| b != base_score) {
        for (class, &b) in base_scores.iter().enumerate() {
            let delta = b - base_score;
            if delta == 0.0 {
                continue;
            }
            let first = tree_info.iter().position(|&c| c as usize == class);
            let Some(t) = first.map(|i| &mut trees[i]) else {
                return Err(r.err(format!(
                    "{param_at}.base_score gives class {class} its own intercept, but the model \
                     has no tree for that class to hold it"
                )));
            };
            for i in 0..t.len() {
                if t.left[i] == -1 {
                    t.split_condition[i] += delta;
                    t.base_weight[i] += delta;
                }
            }
        }
    }

    let model = Model {
        objective,
        base_score,
        num_feature,
        feature_names,
        trees,
        tree_info,
        best_iteration,
    };
    check_model(&model).map_err(|m| r.err(m))?;
    Ok(model)
}

/// DART's dropout weights scale each tree's output; all ones is a plain gbtree.
fn check_no_dropout(r: &Reader<'_>, w: &Value, at: &str) -> Result<(), MlError> {
    let weights = w.as_array().ok_or_else(|| r.wrong(at, "an array", w))?;
    if weights.iter().any(|x| x.as_f64() != Some(1.0)) {
        return Err(r.err(format!(
            "{at}: trees weighted by DART dropout are not supported (only \"gbtree\")"
        )));
    }
    Ok(())
}

fn read_tree(
    r: &Reader<'_>,
    tj: &Value,
    at: &str,
    index: usize,
    num_feature: usize,
) -> Result<Tree, MlError> {
    let t = r.object(tj, at)?;
    if let Some(id) = t.get("id") {
        if id.as_u64() != Some(index as u64) {
            return Err(r.err(format!("{at}.id is {id}, expected {index}")));
        }
    }
    let param_at = format!("{at}.tree_param");
    let param = r.object_field(t, at, "tree_param")?;
    let num_nodes = r.count_param(param, &param_at, "num_nodes")?;
    if param.contains_key("size_leaf_vector") {
        let leaf = r.count_param(param, &param_at, "size_leaf_vector")?;
        if leaf > 1 {
            return Err(r.err(format!(
                "{param_at}.size_leaf_vector is {leaf}: vector leaves (multi-target trees) are \
                 not supported"
            )));
        }
    }
    // Categorical splits: any split type other than 0 (numerical), or stored categories.
    if t.contains_key("split_type") {
        let types: Vec<u8> = r.ints(t, at, "split_type")?;
        if let Some(i) = types.iter().position(|&s| s != 0) {
            return Err(r.err(format!(
                "{at}: node {i} is a categorical split, which is not supported"
            )));
        }
    }
    for key in ["categories", "categories_nodes"] {
        if t.get(key)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            return Err(r.err(format!("{at}.{key}: categorical splits are not supported")));
        }
    }
    let tree = Tree {
        left: r.ints(t, at, "left_children")?,
        right: r.ints(t, at, "right_children")?,
        parent: r.ints(t, at, "parents")?,
        split_index: r.ints(t, at, "split_indices")?,
        split_condition: r.f32s(t, at, "split_conditions")?,
        default_left: r.flags(t, at, "default_left")?,
        base_weight: r.f32s(t, at, "base_weights")?,
        loss_change: r.f32s(t, at, "loss_changes")?,
        sum_hessian: r.f32s(t, at, "sum_hessian")?,
    };
    if tree.len() as u64 != num_nodes {
        return Err(r.err(format!(
            "{param_at}.num_nodes is {num_nodes}, but left_children has {} entries",
            tree.len()
        )));
    }
    check_tree(&tree, num_feature).map_err(|m| r.err(format!("{at}: {m}")))?;
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Depth 2, missing values going left at the root and right below it.
    fn tree_a(shift: f32) -> Tree {
        let mut t = Tree::leaf(0.0, 10.0);
        let (l, r) = t.split(0, 1, 0.5, true, 4.0, (-0.25, 6.0), (0.5, 4.0));
        t.split(l, 0, -1.25, false, 1.5, (-0.5 + shift, 3.0), (0.125, 3.0));
        t.split(r, 2, 3.0, true, 0.75, (0.375, 1.0), (1.0 + shift, 3.0));
        t
    }

    /// Unbalanced, depth 3; values that need every digit of an f32.
    fn tree_b() -> Tree {
        let mut t = Tree::leaf(0.1, 9.0);
        let (l, _) = t.split(0, 2, -0.3, false, 2.2, (0.2, 5.0), (-0.7, 4.0));
        let (_, lr) = t.split(l, 0, 1.1, true, 0.9, (0.33, 2.0), (-0.123_456_79, 3.0));
        t.split(lr, 1, 7.0e-8, false, 1e-3, (2.5e-7, 1.0), (-1.0e6, 2.0));
        t
    }

    fn squared() -> Model {
        Model {
            objective: Objective::SquaredError,
            base_score: 1.5,
            num_feature: 3,
            feature_names: vec![],
            trees: vec![tree_a(0.0), Tree::leaf(0.25, 10.0), tree_b()],
            tree_info: vec![0, 0, 0],
            best_iteration: None,
        }
    }

    fn logistic() -> Model {
        Model {
            objective: Objective::BinaryLogistic,
            base_score: 0.3,
            num_feature: 3,
            feature_names: vec!["a".into(), "b".into(), "c".into()],
            trees: vec![tree_b(), tree_a(0.5), tree_a(-0.5)],
            tree_info: vec![0, 0, 0],
            best_iteration: Some(1),
        }
    }

    fn softprob() -> Model {
        Model {
            objective: Objective::MultiSoftprob { num_class: 3 },
            base_score: 0.5,
            num_feature: 3,
            feature_names: vec!["x".into(), "y".into(), "z".into()],
            trees: vec![
                tree_a(0.0),
                tree_b(),
                tree_a(1.0),
                Tree::leaf(-0.5, 3.0),
                tree_a(-1.0),
                tree_b(),
            ],
            tree_info: vec![0, 1, 2, 0, 1, 2],
            best_iteration: None,
        }
    }

    fn rows() -> Vec<f32> {
        let nan = f32::NAN;
        #[rustfmt::skip]
        let rows = vec![
            0.0, 0.0, 0.0,
            -2.0, 0.5, 3.0,
            1.1, -5.0, -0.3,
            nan, nan, nan,
            nan, 1.0, 2.0,
            -1.25, nan, 4.0,
            2.0, 7.0e-8, -1.0,
        ];
        rows
    }

    fn all_models() -> Vec<Model> {
        vec![squared(), logistic(), softprob()]
    }

    fn format_message(e: MlError) -> String {
        match e {
            MlError::Format { message, .. } => message,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    /// The JSON of `m`, changed by `edit`, parsed back.
    fn parse_edited(m: &Model, edit: impl FnOnce(&mut Value)) -> Result<Model, MlError> {
        let mut v: Value = serde_json::from_str(&m.to_json_string().unwrap()).unwrap();
        edit(&mut v);
        Model::from_json_str(&v.to_string())
    }

    fn at<'v>(v: &'v mut Value, pointer: &str) -> &'v mut Value {
        v.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("no {pointer}"))
    }

    /// A change to a model's JSON.
    type Edit = Box<dyn FnOnce(&mut Value)>;

    const TREE0: &str = "/learner/gradient_booster/model/trees/0";

    #[test]
    fn round_trips_keep_every_field_and_every_prediction() {
        for m in all_models() {
            let text = m.to_json_string().unwrap();
            let back = Model::from_json_str(&text).unwrap();
            assert_eq!(back, m, "{}", m.objective.name());
            let (p, q) = (
                m.predict_rows(&rows()).unwrap(),
                back.predict_rows(&rows()).unwrap(),
            );
            assert_eq!(p.len(), 7 * m.objective.groups());
            assert!(p.iter().zip(&q).all(|(a, b)| a.to_bits() == b.to_bits()));
            // Saving again gives the same text.
            assert_eq!(back.to_json_string().unwrap(), text);
        }
    }

    #[test]
    fn files_round_trip() {
        let dir = std::env::temp_dir().join(format!("starling-ml-xgb-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.json");
        let m = softprob();
        m.save_json(&path).unwrap();
        assert_eq!(Model::load_json(&path).unwrap(), m);
        let missing = Model::load_json(dir.join("absent.json")).unwrap_err();
        assert!(matches!(missing, MlError::Io { .. }), "{missing:?}");
        std::fs::write(&path, b"{\x00\xff\xfe binary").unwrap();
        let binary = Model::load_json(&path).unwrap_err().to_string();
        assert!(
            binary.contains("model.json") && binary.contains("UBJSON"),
            "{binary}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_the_fields_xgboost_reads() {
        let text = logistic().to_json_string().unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], json!([3, 0, 0]));
        let l = &v["learner"];
        assert_eq!(l["attributes"], json!({"best_iteration": "1"}));
        assert_eq!(l["feature_names"], json!(["a", "b", "c"]));
        assert_eq!(l["feature_types"], json!([]));
        assert_eq!(
            l["learner_model_param"],
            json!({"base_score": "3E-1", "boost_from_average": "1", "num_class": "0",
                   "num_feature": "3", "num_target": "1"})
        );
        assert_eq!(
            l["objective"],
            json!({"name": "binary:logistic", "reg_loss_param": {"scale_pos_weight": "1"}})
        );
        let g = &l["gradient_booster"];
        assert_eq!(g["name"], "gbtree");
        assert_eq!(
            g["model"]["gbtree_model_param"],
            json!({"num_parallel_tree": "1", "num_trees": "3"})
        );
        assert_eq!(g["model"]["tree_info"], json!([0, 0, 0]));
        assert_eq!(g["model"]["iteration_indptr"], json!([0, 1, 2, 3]));
        let t = &g["model"]["trees"][1];
        assert_eq!(t["id"], 1);
        assert_eq!(
            t["tree_param"],
            json!({"num_deleted": "0", "num_feature": "3", "num_nodes": "7",
                   "size_leaf_vector": "1"})
        );
        assert_eq!(t["parents"], json!([2147483647, 0, 0, 1, 1, 2, 2]));
        assert_eq!(t["default_left"], json!([1, 0, 1, 0, 0, 0, 0]));
        assert_eq!(t["split_type"], json!([0, 0, 0, 0, 0, 0, 0]));
        for key in [
            "categories",
            "categories_nodes",
            "categories_segments",
            "categories_sizes",
        ] {
            assert_eq!(t[key], json!([]), "{key}");
        }
        // Floats always carry a point or an exponent: XGBoost reads `1` as an integer.
        assert!(text.contains(r#""split_conditions":[0.5,-1.25,3.0,0.0,0.125,0.375,1.5]"#));

        let v: Value = serde_json::from_str(&softprob().to_json_string().unwrap()).unwrap();
        let l = &v["learner"];
        assert_eq!(l["learner_model_param"]["num_class"], "3");
        assert_eq!(l["learner_model_param"]["base_score"], "5E-1");
        assert_eq!(l["attributes"], json!({}));
        assert_eq!(
            l["objective"]["softmax_multiclass_param"],
            json!({"num_class": "3"})
        );
        assert_eq!(
            l["gradient_booster"]["model"]["tree_info"],
            json!([0, 1, 2, 0, 1, 2])
        );
        assert_eq!(
            l["gradient_booster"]["model"]["iteration_indptr"],
            json!([0, 3, 6])
        );
    }

    #[test]
    fn reads_both_base_score_notations() {
        for (text, want) in [
            ("5E-1", 0.5),
            ("[5E-1]", 0.5),
            ("0.25", 0.25),
            ("[-2E0]", -2.0),
        ] {
            let m = parse_edited(&squared(), |v| {
                *at(v, "/learner/learner_model_param/base_score") = json!(text);
            })
            .unwrap();
            assert_eq!(m.base_score, want, "{text}");
        }
        for bad in ["", "[]", "abc", "[1E0,x]", "NaN", "inf"] {
            let e = parse_edited(&squared(), |v| {
                *at(v, "/learner/learner_model_param/base_score") = json!(bad);
            })
            .unwrap_err();
            assert!(format_message(e).contains("base_score"), "{bad}");
        }
    }

    #[test]
    fn per_class_intercepts_move_into_each_class_s_first_tree() {
        let m = softprob();
        let loaded = parse_edited(&m, |v| {
            *at(v, "/learner/learner_model_param/base_score") = json!("[1E-1,2.5E-1,-5E-1]");
        })
        .unwrap();
        assert_eq!(loaded.base_score, 0.1);
        let r = rows();
        let got = loaded.predict_rows(&r).unwrap();
        for (row, p) in r.chunks(3).zip(got.chunks(3)) {
            let mut margins = [0.1f32, 0.25, -0.5];
            for (t, &c) in m.trees.iter().zip(&m.tree_info) {
                margins[c as usize] += t.predict_row(row);
            }
            crate::model::softmax(&mut margins);
            for (a, b) in margins.iter().zip(p) {
                assert!((a - b).abs() < 1e-6, "{margins:?} vs {p:?}");
            }
        }
        // Equal intercepts need no folding.
        let same = parse_edited(&m, |v| {
            *at(v, "/learner/learner_model_param/base_score") = json!("[5E-1,5E-1,5E-1]");
        })
        .unwrap();
        assert_eq!(same, m);
        // Three intercepts for one output is an error.
        let e = parse_edited(&squared(), |v| {
            *at(v, "/learner/learner_model_param/base_score") = json!("[1E0,2E0,3E0]");
        })
        .unwrap_err();
        assert!(format_message(e).contains("3 values for 1 output"));
    }

    #[test]
    fn malformed_input_is_a_format_error_that_says_what_is_wrong() {
        let e = Model::from_json_str("this is not json").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("invalid JSON"), "{text}");
        assert!(text.starts_with(IN_MEMORY), "{text}");
        assert!(format_message(Model::from_json_str("[1, 2]").unwrap_err()).contains("object"));

        let cases: Vec<(&str, Edit)> = vec![
            ("missing field `learner`", Box::new(|v| {
                v.as_object_mut().unwrap().remove("learner");
            })),
            ("missing field `learner.objective`", Box::new(|v| {
                at(v, "/learner").as_object_mut().unwrap().remove("objective");
            })),
            ("missing field `learner.gradient_booster.model.trees[0].split_conditions`",
             Box::new(|v| {
                at(v, TREE0).as_object_mut().unwrap().remove("split_conditions");
            })),
            ("learner.gradient_booster.model.trees[0].left_children[1]: expected an integer, found a string",
             Box::new(|v| *at(v, &format!("{TREE0}/left_children/1")) = json!("x"))),
            ("learner.gradient_booster.model.trees[0].default_left[0]: expected 0 or 1",
             Box::new(|v| *at(v, &format!("{TREE0}/default_left/0")) = json!(2))),
            ("learner.learner_model_param.num_feature: \"three\" is not a non-negative integer",
             Box::new(|v| *at(v, "/learner/learner_model_param/num_feature") = json!("three"))),
            ("booster \"dart\" is not supported", Box::new(|v| {
                let booster = at(v, "/learner/gradient_booster");
                let inner = booster.clone();
                *booster = json!({"name": "dart", "gbtree": inner, "weight_drop": [1.0, 0.5, 1.0]});
            })),
            ("booster \"gblinear\" is not supported", Box::new(|v| {
                *at(v, "/learner/gradient_booster") =
                    json!({"name": "gblinear", "model": {"weights": [0.1, 0.2]}});
            })),
            ("DART dropout", Box::new(|v| {
                let model = at(v, "/learner/gradient_booster/model").as_object_mut().unwrap();
                model.insert("weight_drop".into(), json!([1.0, 0.5, 1.0]));
            })),
            ("objective \"reg:logistic\" is not supported",
             Box::new(|v| *at(v, "/learner/objective/name") = json!("reg:logistic"))),
            ("node 0 is a categorical split",
             Box::new(|v| *at(v, &format!("{TREE0}/split_type/0")) = json!(1))),
            ("categorical splits are not supported", Box::new(|v| {
                *at(v, &format!("{TREE0}/categories")) = json!([1, 3]);
                *at(v, &format!("{TREE0}/categories_nodes")) = json!([0]);
            })),
            ("feature 1 (\"b\") is categorical",
             Box::new(|v| *at(v, "/learner/feature_types") = json!(["q", "c", "q"]))),
            ("vector leaves", Box::new(|v| {
                *at(v, &format!("{TREE0}/tree_param/size_leaf_vector")) = json!("2");
            })),
            ("multi-target", Box::new(|v| {
                *at(v, "/learner/learner_model_param/num_target") = json!("2");
            })),
            ("boosted random forests", Box::new(|v| {
                *at(v, "/learner/gradient_booster/model/gbtree_model_param/num_parallel_tree") =
                    json!("2");
            })),
            ("num_trees is 4, but there are 3 trees", Box::new(|v| {
                *at(v, "/learner/gradient_booster/model/gbtree_model_param/num_trees") =
                    json!("4");
            })),
            ("tree_info has 2 entries for 3 trees", Box::new(|v| {
                *at(v, "/learner/gradient_booster/model/tree_info") = json!([0, 0]);
            })),
            ("tree_info[1]: class 1 but the model has 1 output", Box::new(|v| {
                *at(v, "/learner/gradient_booster/model/tree_info/1") = json!(1);
            })),
            ("trees[0]: node 1: left child 9 is not a node",
             Box::new(|v| *at(v, &format!("{TREE0}/left_children/1")) = json!(9))),
            ("trees[0]: node 0 splits on feature 3 but the model has 3 features",
             Box::new(|v| *at(v, &format!("{TREE0}/split_indices/0")) = json!(3))),
            ("trees[0].tree_param.num_nodes is 6, but left_children has 7 entries",
             Box::new(|v| *at(v, &format!("{TREE0}/tree_param/num_nodes")) = json!("6"))),
            ("trees[0]: base_weights has 6 entries", Box::new(|v| {
                at(v, &format!("{TREE0}/base_weights")).as_array_mut().unwrap().pop();
            })),
            ("best_iteration: expected a round number",
             Box::new(|v| *at(v, "/learner/attributes/best_iteration") = json!("best"))),
            ("trees[0].split_conditions[0]: expected a number, found a string",
             Box::new(|v| *at(v, &format!("{TREE0}/split_conditions/0")) = json!("NaN"))),
        ];
        for (want, edit) in cases {
            let e = parse_edited(&logistic(), edit).unwrap_err();
            let message = format_message(e);
            assert!(message.contains(want), "wanted {want:?} in {message:?}");
        }
    }

    #[test]
    fn unsaveable_models_are_refused() {
        let mut m = squared();
        m.trees[0].split_condition[3] = f32::NAN;
        let e = format_message(m.to_json_string().unwrap_err());
        assert!(e.contains("tree 0: node 3: split_conditions is NaN"), "{e}");
        let mut m = logistic();
        m.base_score = 1.0;
        assert!(format_message(m.to_json_string().unwrap_err()).contains("strictly between"));
        let mut m = softprob();
        m.trees.pop();
        m.tree_info.pop();
        assert!(format_message(m.to_json_string().unwrap_err()).contains("whole number"));
        let mut m = logistic();
        m.feature_names.pop();
        assert!(format_message(m.to_json_string().unwrap_err()).contains("2 feature names"));
    }

    #[test]
    fn deleted_nodes_are_counted_and_kept() {
        // A pruned tree as XGBoost keeps it: node 1's children were deleted.
        let mut t = tree_a(0.0);
        for i in [3, 4] {
            t.split_index[i] = DELETED_SPLIT_INDEX;
            t.default_left[i] = true;
        }
        t.left[1] = -1;
        t.right[1] = -1;
        let mut m = squared();
        m.trees[0] = t;
        let text = m.to_json_string().unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v.pointer(&format!("{TREE0}/tree_param/num_deleted")),
            Some(&json!("2"))
        );
        assert_eq!(Model::from_json_str(&text).unwrap(), m);
    }

    fn read_csv(path: &std::path::Path) -> Vec<Vec<f32>> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split(',')
                    .map(|x| x.trim().parse::<f32>().unwrap())
                    .collect()
            })
            .collect()
    }

    /// Models trained and saved by XGBoost (`tests/data/make_reference.py`), with XGBoost's
    /// predictions for a few rows.
    #[test]
    fn reads_models_saved_by_xgboost() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let rows: Vec<f32> = read_csv(&dir.join("xgb_ref_rows.csv")).concat();
        for (name, objective, best, trees) in [
            ("squarederror", Objective::SquaredError, None, 6),
            ("logistic", Objective::BinaryLogistic, Some(16), 20),
            (
                "softprob",
                Objective::MultiSoftprob { num_class: 3 },
                None,
                12,
            ),
        ] {
            let m = Model::load_json(dir.join(format!("xgb_ref_{name}.json"))).unwrap();
            assert_eq!(m.objective, objective);
            assert_eq!(m.best_iteration, best, "{name}");
            assert_eq!(m.trees.len(), trees, "{name}");
            assert_eq!(m.num_feature, 4);
            let names = if name == "squarederror" { 0 } else { 4 };
            assert_eq!(m.feature_names.len(), names);
            let want = read_csv(&dir.join(format!("xgb_ref_pred_{name}.csv")));
            let got = m.predict_rows(&rows).unwrap();
            assert_eq!(got.len(), want.len() * m.objective.groups());
            for (i, (w, g)) in want
                .iter()
                .zip(got.chunks(m.objective.groups()))
                .enumerate()
            {
                for (a, b) in w.iter().zip(g) {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "{name} row {i}: xgboost {w:?}, ours {g:?}"
                    );
                }
            }
            // Saving and loading again changes no prediction.
            let again = Model::from_json_str(&m.to_json_string().unwrap()).unwrap();
            assert_eq!(again.predict_rows(&rows).unwrap(), got);
        }
    }
}
