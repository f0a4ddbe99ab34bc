//! Distributed modeling on Starling.
//!
//! [`GbdtEstimator`] (also exported as [`XGBEstimator`]) trains gradient-boosted trees with
//! XGBoost's `hist` method, data-parallel over Starling tasks: each worker task reads only its
//! own shard of a [`DataConnector`] on its own node, keeps it binned in the object store, and
//! computes gradient histograms that are summed by a tree reduction; the driver only sees
//! histograms and trees. Models save and load XGBoost's JSON model format.
//!
//! This crate uses only Starling's public API: everything here could live in a user's crate.

pub mod data;
pub mod hist;
pub mod model;
pub mod params;
mod partition;
pub mod quantile;
mod scratch;
pub mod sketch;
pub mod train;
pub mod xgb_json;

pub use data::{DataConnector, DbUrl, Frame, Table};
pub use model::{ImportanceType, Model, Objective, Tree};
pub use params::{GrowPolicy, Params, ScalingConfig};
pub use sketch::Cuts;
pub use train::{FitReport, GbdtEstimator, XGBEstimator, MIN_ROWS_PER_WORKER};

/// What can go wrong in data loading, training and model I/O.
#[derive(Debug, thiserror::Error)]
pub enum MlError {
    /// A parameter is out of range or unknown.
    #[error("invalid parameter: {0}")]
    Param(String),
    /// Data has the wrong shape (row width, number of labels, ...).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// A requested column is not in the data.
    #[error("column {column:?} not found (columns: {available})")]
    MissingColumn {
        /// The column asked for.
        column: String,
        /// The columns the data has, comma-separated.
        available: String,
    },
    /// A value could not be read as a number.
    #[error("{location}: column {column:?}: {value:?} is not a number")]
    NotNumeric {
        /// Where: `file:line` or `row N`.
        location: String,
        /// The column.
        column: String,
        /// The text found.
        value: String,
    },
    /// A worker's shard has no rows.
    #[error("shard {rank} of {world} is empty ({detail})")]
    EmptyShard {
        /// The shard.
        rank: usize,
        /// Number of shards.
        world: usize,
        /// What was read.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A data file or a model file is malformed.
    #[error("{path}: {message}")]
    Format {
        /// The file (or what was parsed).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A database refused the connection's credentials or the query (its server's message;
    /// the connection string shown without its password). A server that cannot be reached is
    /// [`MlError::Io`].
    #[error("{url}: {message}")]
    Database {
        /// The connection string, password replaced by `***`.
        url: String,
        /// What the server said.
        message: String,
    },
    /// A Starling task or object operation failed.
    #[error(transparent)]
    Engine(#[from] starling::Error),
}
