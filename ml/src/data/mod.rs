//! Sharded data connectors.
//!
//! A [`DataConnector`] names where training data lives — CSV files, Parquet files, a
//! PostgreSQL query or a small in-memory [`Table`] — without holding the data. It is plain data
//! (serde), so the driver sends it to every worker task, and each worker calls
//! [`DataConnector::load_shard`] with its own `rank` of `world` to read only its part on its own
//! node: no row passes through the driver.
//!
//! How the shards are cut, so that shards `0..world` concatenated hold every row exactly once,
//! in file order:
//!
//! - **CSV**: the data bytes of all files (each file's bytes after its header line) are seen as
//!   one concatenation that is cut into `world` equal byte ranges. A line belongs to the rank
//!   whose range holds its first byte. A rank seeks straight to its range and reads past its end
//!   only to finish its last line.
//! - **Parquet**: the row groups of all files, in order, are cut into `world` contiguous blocks
//!   (`i * groups / world ..`). With fewer row groups than ranks, the rows are cut into `world`
//!   contiguous row ranges instead. Only the asked columns are read.
//! - **Table**: rows `rank * n / world .. (rank + 1) * n / world`.
//! - **PostgreSQL** (`postgres` feature): each rank counts the query's rows and reads rows
//!   `rank * n / world .. (rank + 1) * n / world` of it straight from the server (`OFFSET` /
//!   `LIMIT` in one snapshot); the order is the query's (give it an `ORDER BY` on a unique key
//!   for one that no plan can change).
//!
//! Values become `f32`; a missing value is `NaN`. In CSV an empty field, `NA`, `NaN` or `nan`
//! is missing; in Parquet and PostgreSQL a null is.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::MlError;

mod csv;
mod parquet;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(not(feature = "postgres"))]
mod postgres {
    //! Without the `postgres` feature a PostgreSQL connector is refused at use.
    use super::{Frame, MlError};

    fn off() -> MlError {
        MlError::Param(
            "PostgreSQL support is off: build starling-ml with its `postgres` feature".into(),
        )
    }
    pub(super) fn check_url(_: &str) -> Result<(), MlError> {
        Err(off())
    }
    pub(super) fn columns(_: &str, _: &str) -> Result<Vec<String>, MlError> {
        Err(off())
    }
    pub(super) fn load_shard(
        _: &str,
        _: &str,
        _: usize,
        _: usize,
        _: &[String],
        _: Option<&str>,
    ) -> Result<Frame, MlError> {
        Err(off())
    }
}

use csv::{load_csv_shard, read_csv_header};
use parquet::{load_parquet_shard, parquet_columns};

/// One worker's rows: column-major feature values and optional labels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// Names of the feature columns, in the order of [`Frame::columns`].
    pub feature_names: Vec<String>,
    /// Column-major values: one `Vec` of `n_rows` values per feature column; `NaN` is missing.
    pub columns: Vec<Vec<f32>>,
    /// The label of each row, when a label column was asked for.
    pub labels: Option<Vec<f32>>,
    /// Number of rows.
    pub n_rows: usize,
}

impl Frame {
    /// The feature values row-major: `n_rows * columns.len()` values, row after row.
    pub fn row_major(&self) -> Vec<f32> {
        let width = self.columns.len();
        let mut out = vec![f32::NAN; self.n_rows * width];
        for (j, column) in self.columns.iter().enumerate() {
            for (i, &v) in column.iter().take(self.n_rows).enumerate() {
                out[i * width + j] = v;
            }
        }
        out
    }
}

/// A small column-major table held in memory (and sent along with the connector).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// One `Vec` of values per column, all of the same length; `NaN` is missing.
    pub data: Vec<Vec<f32>>,
}

impl Table {
    /// A table of `columns` holding `data` (one `Vec` per column).
    ///
    /// Errors with [`MlError::Shape`] unless there is one data column per name and all have the
    /// same length.
    pub fn new(columns: Vec<String>, data: Vec<Vec<f32>>) -> Result<Self, MlError> {
        let table = Table { columns, data };
        table.n_rows()?;
        Ok(table)
    }

    /// Number of rows; [`MlError::Shape`] when the columns disagree.
    pub fn n_rows(&self) -> Result<usize, MlError> {
        if self.columns.len() != self.data.len() {
            return Err(MlError::Shape(format!(
                "table has {} column names but {} data columns",
                self.columns.len(),
                self.data.len()
            )));
        }
        let n = self.data.first().map_or(0, Vec::len);
        for (name, column) in self.columns.iter().zip(&self.data) {
            if column.len() != n {
                return Err(MlError::Shape(format!(
                    "table column {name:?} has {} values, column {:?} has {n}",
                    column.len(),
                    self.columns[0]
                )));
            }
        }
        Ok(n)
    }
}

/// Where training data lives; each worker reads its own shard with
/// [`DataConnector::load_shard`].
///
/// Paths are resolved when the connector is made (on the driver) and must name the same files
/// on every node that loads a shard (a shared or replicated file system).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DataConnector {
    /// CSV files with a header line each (the same columns in all), read in this order.
    Csv {
        /// The files.
        paths: Vec<PathBuf>,
    },
    /// Parquet files with the same flat schema, read in this order.
    Parquet {
        /// The files.
        paths: Vec<PathBuf>,
    },
    /// An in-memory table.
    Table(Table),
    /// The rows of a PostgreSQL query, sharded by the server (see the module's docs).
    Postgres {
        /// The connection string: a URL (`postgresql://user@host/db`) or key-value pairs
        /// (`host=/run/postgresql dbname=db`), as libpq takes them.
        url: DbUrl,
        /// A `SELECT` (or anything usable as a subquery) whose columns are the features and
        /// the label.
        query: String,
    },
}

/// A database connection string, shown with its password replaced by `***` (in `Debug`,
/// `Display` and every error).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DbUrl(String);

impl DbUrl {
    /// The string as given, password included.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", redact(&self.0))
    }
}

impl std::fmt::Display for DbUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

/// `url` with the value of its password (a URL's `user:password@`, a `password=` pair or
/// query parameter) replaced by `***`.
fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let authority_start = scheme_end + 3;
        let authority_end = out[authority_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| authority_start + i);
        if let Some(at) = out[authority_start..authority_end].rfind('@') {
            let userinfo = authority_start..authority_start + at;
            if let Some(colon) = out[userinfo.clone()].find(':') {
                out.replace_range(userinfo.start + colon + 1..userinfo.end, "***");
            }
        }
    }
    // `password=value` as a key-value pair (value up to white space, or quoted) or a URL query
    // parameter (value up to `&`).
    let mut from = 0;
    while let Some(i) = out[from..].find("password") {
        let key = from + i;
        let after = out[key + "password".len()..].trim_start_matches(' ');
        let Some(value) = after.strip_prefix('=') else {
            from = key + 1;
            continue;
        };
        let value = value.trim_start_matches(' ');
        let start = out.len() - value.len();
        let len = if let Some(quoted) = value.strip_prefix('\'') {
            let mut end = 0;
            let mut chars = quoted.char_indices();
            while let Some((k, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        end = k + 2;
                        break;
                    }
                    _ => end = k + 1 + c.len_utf8(),
                }
            }
            end.max(1)
        } else {
            value.find([' ', '\t', '\n', '&']).unwrap_or(value.len())
        };
        out.replace_range(start..start + len, "***");
        from = start + 3;
    }
    out
}

impl DataConnector {
    /// CSV files named by `pattern`: one file, a directory (all its `*.csv` files, sorted by
    /// name) or a glob such as `data/part-*.csv` (matches sorted by name).
    ///
    /// Errors when the pattern is not a valid glob ([`MlError::Param`]) or when no file matches
    /// ([`MlError::Io`]).
    pub fn csv(pattern: &str) -> Result<Self, MlError> {
        Ok(DataConnector::Csv {
            paths: resolve_files(pattern, "csv")?,
        })
    }

    /// Parquet files named by `pattern`: one file, a directory (all its `*.parquet` files,
    /// sorted by name) or a glob (matches sorted by name). Errors as [`DataConnector::csv`].
    pub fn parquet(pattern: &str) -> Result<Self, MlError> {
        Ok(DataConnector::Parquet {
            paths: resolve_files(pattern, "parquet")?,
        })
    }

    /// These CSV files, in this order.
    pub fn csv_files(paths: Vec<PathBuf>) -> Self {
        DataConnector::Csv { paths }
    }

    /// These Parquet files, in this order.
    pub fn parquet_files(paths: Vec<PathBuf>) -> Self {
        DataConnector::Parquet { paths }
    }

    /// An in-memory table.
    pub fn table(table: Table) -> Self {
        DataConnector::Table(table)
    }

    /// The rows of `query` on the PostgreSQL server at `url`; each worker reads only its shard
    /// straight from the server (see the module's docs for how rows are cut and read).
    ///
    /// Errors with [`MlError::Param`] when `url` is not a connection string, or when this build
    /// has no `postgres` feature. Nothing is connected to until the connector is used.
    pub fn postgres(url: &str, query: &str) -> Result<Self, MlError> {
        postgres::check_url(url)?;
        Ok(DataConnector::Postgres {
            url: DbUrl(url.to_string()),
            query: query.to_string(),
        })
    }

    /// The column names: the header of the first CSV file, the schema of the first Parquet
    /// file, or the table's columns.
    pub fn columns(&self) -> Result<Vec<String>, MlError> {
        match self {
            DataConnector::Csv { paths } => {
                let first = paths.first().ok_or_else(no_files)?;
                Ok(read_csv_header(first)?.columns)
            }
            DataConnector::Parquet { paths } => {
                let first = paths.first().ok_or_else(no_files)?;
                parquet_columns(first)
            }
            DataConnector::Table(table) => Ok(table.columns.clone()),
            DataConnector::Postgres { url, query } => postgres::columns(&url.0, query),
        }
    }

    /// Reads shard `rank` of `world`: the feature columns `input_cols` (in that order) and, if
    /// given, the labels of `label_col`, for this shard's rows only.
    ///
    /// Errors: [`MlError::Param`] when `world == 0` or `rank >= world`;
    /// [`MlError::MissingColumn`] for an unknown column; [`MlError::NotNumeric`] for a value
    /// that is not a number (with `file:line` for CSV); [`MlError::Format`] for a malformed
    /// file, a missing label or an unsupported Parquet column type; [`MlError::EmptyShard`]
    /// when the shard holds no rows; [`MlError::Io`] when a file cannot be read.
    pub fn load_shard(
        &self,
        rank: usize,
        world: usize,
        input_cols: &[String],
        label_col: Option<&str>,
    ) -> Result<Frame, MlError> {
        if world == 0 || rank >= world {
            return Err(MlError::Param(format!(
                "shard rank {rank} of world {world}: need world >= 1 and rank < world"
            )));
        }
        match self {
            DataConnector::Csv { paths } => {
                load_csv_shard(paths, rank, world, input_cols, label_col)
            }
            DataConnector::Parquet { paths } => {
                load_parquet_shard(paths, rank, world, input_cols, label_col)
            }
            DataConnector::Table(table) => {
                load_table_shard(table, rank, world, input_cols, label_col)
            }
            DataConnector::Postgres { url, query } => {
                postgres::load_shard(&url.0, query, rank, world, input_cols, label_col)
            }
        }
    }
}

fn no_files() -> MlError {
    MlError::Param("the data connector names no files".into())
}

fn io_err(path: &Path, source: std::io::Error) -> MlError {
    MlError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn format_err(path: impl Into<String>, message: impl Into<String>) -> MlError {
    MlError::Format {
        path: path.into(),
        message: message.into(),
    }
}

fn missing_column(column: &str, available: &[String]) -> MlError {
    MlError::MissingColumn {
        column: column.to_string(),
        available: available.join(", "),
    }
}

/// Index of each asked column in `available`, features first, then the label.
fn column_indices(
    available: &[String],
    input_cols: &[String],
    label_col: Option<&str>,
) -> Result<(Vec<usize>, Option<usize>), MlError> {
    let find = |name: &str| {
        available
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| missing_column(name, available))
    };
    let features = input_cols
        .iter()
        .map(|c| find(c))
        .collect::<Result<Vec<_>, _>>()?;
    let label = label_col.map(find).transpose()?;
    Ok((features, label))
}

/// The row range `rank * n / world .. (rank + 1) * n / world`.
fn even_range(n: u64, rank: usize, world: usize) -> (u64, u64) {
    let cut = |r: usize| (u128::from(n) * r as u128 / world as u128) as u64;
    (cut(rank), cut(rank + 1))
}

// ---------------------------------------------------------------------------------------------
// File patterns
// ---------------------------------------------------------------------------------------------

fn resolve_files(pattern: &str, extension: &str) -> Result<Vec<PathBuf>, MlError> {
    let path = Path::new(pattern);
    let not_found = |what: String| MlError::Io {
        path: pattern.to_string(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, what),
    };
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| io_err(path, e))? {
            let entry = entry.map_err(|e| io_err(path, e))?;
            let p = entry.path();
            if p.is_file() && p.extension().is_some_and(|e| e == extension) {
                files.push(p);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(not_found(format!(
                "no *.{extension} files in the directory"
            )));
        }
        return Ok(files);
    }
    if !pattern.contains(['*', '?', '[']) {
        return Err(not_found("no such file or directory".into()));
    }
    let matches = glob::glob(pattern)
        .map_err(|e| MlError::Param(format!("invalid file pattern {pattern:?}: {e}")))?;
    let mut files = Vec::new();
    for m in matches {
        let p = m.map_err(|e| {
            let p = e.path().to_path_buf();
            io_err(&p, e.into())
        })?;
        if p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(not_found("no file matches the pattern".into()));
    }
    Ok(files)
}

// ---------------------------------------------------------------------------------------------
// Table
// ---------------------------------------------------------------------------------------------

fn load_table_shard(
    table: &Table,
    rank: usize,
    world: usize,
    input_cols: &[String],
    label_col: Option<&str>,
) -> Result<Frame, MlError> {
    let n = table.n_rows()?;
    let (features, label) = column_indices(&table.columns, input_cols, label_col)?;
    let (lo, hi) = even_range(n as u64, rank, world);
    let (lo, hi) = (lo as usize, hi as usize);
    if lo == hi {
        return Err(MlError::EmptyShard {
            rank,
            world,
            detail: format!("table of {n} rows"),
        });
    }
    let labels = match label {
        Some(j) => {
            let values = table.data[j][lo..hi].to_vec();
            if let Some(i) = values.iter().position(|v| v.is_nan()) {
                return Err(format_err(
                    "table",
                    format!(
                        "row {}: label column {:?} is missing",
                        lo + i,
                        table.columns[j]
                    ),
                ));
            }
            Some(values)
        }
        None => None,
    };
    Ok(Frame {
        feature_names: input_cols.to_vec(),
        columns: features
            .iter()
            .map(|&j| table.data[j][lo..hi].to_vec())
            .collect(),
        labels,
        n_rows: hi - lo,
    })
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted_in_every_form() {
        assert_eq!(
            redact("postgresql://ann:s3cr:et@db.example:5432/prod?sslmode=disable"),
            "postgresql://ann:***@db.example:5432/prod?sslmode=disable"
        );
        assert_eq!(redact("postgres://ann@host/db"), "postgres://ann@host/db");
        assert_eq!(
            redact("postgres://host/db?user=ann&password=pw&x=1"),
            "postgres://host/db?user=ann&password=***&x=1"
        );
        assert_eq!(
            redact("host=/tmp user=ann password = pw dbname=x"),
            "host=/tmp user=ann password = *** dbname=x"
        );
        assert_eq!(
            redact("host=/tmp password='a b\\'c' dbname=x"),
            "host=/tmp password=*** dbname=x"
        );
        assert_eq!(redact("host=/tmp dbname=x"), "host=/tmp dbname=x");
    }
}
