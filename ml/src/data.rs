//! Sharded data connectors.
//!
//! A [`DataConnector`] names where training data lives — CSV files, Parquet files or a small
//! in-memory [`Table`] — without holding the data of the files. It is plain data (serde), so the
//! driver sends it to every worker task, and each worker calls
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
//!
//! Values become `f32`; a missing value is `NaN`. In CSV an empty field, `NA`, `NaN` or `nan`
//! is missing; in Parquet a null is.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::MlError;

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

// ---------------------------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------------------------

/// A CSV file's header: its column names and where its data bytes start and end.
struct CsvHeader {
    columns: Vec<String>,
    data_start: u64,
    len: u64,
}

fn read_csv_header(path: &Path) -> Result<CsvHeader, MlError> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let read = reader
        .read_until(b'\n', &mut line)
        .map_err(|e| io_err(path, e))?;
    if read == 0 {
        return Err(format_err(
            path.display().to_string(),
            "empty file: a header line is required",
        ));
    }
    let mut text = trim_line_end(&line);
    if let Some(rest) = text.strip_prefix(b"\xEF\xBB\xBF") {
        text = rest;
    }
    let location = || format!("{}:1", path.display());
    let text = std::str::from_utf8(text).map_err(|_| format_err(location(), "not UTF-8"))?;
    let mut columns = Vec::new();
    split_fields(text, &mut columns).map_err(|m| format_err(location(), m))?;
    let columns: Vec<String> = columns.into_iter().map(|c| c.trim().to_string()).collect();
    if columns.iter().all(String::is_empty) {
        return Err(format_err(location(), "empty header line"));
    }
    Ok(CsvHeader {
        columns,
        data_start: read as u64,
        len,
    })
}

/// The line without its `\n` or `\r\n`.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits one CSV line into `out`: fields separated by commas; a field may be double-quoted
/// (with `""` for a quote inside), but may not hold a line break.
fn split_fields<'a>(line: &'a str, out: &mut Vec<std::borrow::Cow<'a, str>>) -> Result<(), String> {
    use std::borrow::Cow;
    out.clear();
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start_matches([' ', '\t']);
        if let Some(quoted) = trimmed.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '"')) => {
                        if quoted[i + 1..].starts_with('"') {
                            value.push('"');
                            chars.next();
                        } else {
                            break i + 1;
                        }
                    }
                    Some((_, c)) => value.push(c),
                    None => return Err(
                        "unterminated quoted field (line breaks inside fields are not supported)"
                            .into(),
                    ),
                }
            };
            out.push(Cow::Owned(value));
            let after = quoted[end..].trim_start_matches([' ', '\t']);
            if after.is_empty() {
                return Ok(());
            }
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None => return Err("text after a closing quote".into()),
            }
        } else {
            match rest.find(',') {
                Some(i) => {
                    out.push(Cow::Borrowed(&rest[..i]));
                    rest = &rest[i + 1..];
                }
                None => {
                    out.push(Cow::Borrowed(rest));
                    return Ok(());
                }
            }
        }
    }
}

/// A CSV value: `None` when missing (empty, `NA`, `NaN`, `nan`), `Some(Err)` when not a number.
/// Where a CSV shard's rows go: the asked columns' values, and the labels.
struct RowSink<'a> {
    /// The file's column names.
    columns: &'a [String],
    /// Index of each asked feature column, and of the label column.
    features: &'a [usize],
    label: Option<usize>,
    out: &'a mut [Vec<f32>],
    labels: Option<&'a mut Vec<f32>>,
}

impl RowSink<'_> {
    /// Appends one row of `n_fields` fields: `value(j)` parses field `j`, `shown(j)` is the field
    /// as written (for errors), `location()` says where the row is.
    fn push(
        &mut self,
        n_fields: usize,
        value: impl Fn(usize) -> Option<Result<f32, ()>>,
        shown: impl Fn(usize) -> String,
        location: impl Fn() -> String,
    ) -> Result<(), MlError> {
        let columns = self.columns;
        if n_fields != columns.len() {
            return Err(format_err(
                location(),
                format!("{n_fields} fields, the header has {}", columns.len()),
            ));
        }
        let not_numeric = |j: usize| MlError::NotNumeric {
            location: location(),
            column: columns[j].clone(),
            value: shown(j),
        };
        for (out, &j) in self.out.iter_mut().zip(self.features) {
            match value(j) {
                None => out.push(f32::NAN),
                Some(Ok(v)) => out.push(v),
                Some(Err(())) => return Err(not_numeric(j)),
            }
        }
        if let (Some(labels), Some(j)) = (self.labels.as_mut(), self.label) {
            match value(j) {
                Some(Ok(v)) if !v.is_nan() => labels.push(v),
                Some(Err(())) => return Err(not_numeric(j)),
                _ => {
                    return Err(format_err(
                        location(),
                        format!("label column {:?} is missing", columns[j]),
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A field's value: `None` when it is empty or a missing marker (`NA`, `NaN`, `nan`), an error
/// when it is not a number (or not UTF-8). Surrounding ASCII whitespace is ignored.
fn parse_bytes(field: &[u8]) -> Option<Result<f32, ()>> {
    let field = field.trim_ascii();
    match field {
        b"" | b"NA" | b"NaN" | b"nan" => None,
        _ => Some(
            std::str::from_utf8(field)
                .map_err(|_| ())
                .and_then(|f| f.parse::<f32>().map_err(|_| ())),
        ),
    }
}

/// [`parse_bytes`] of a field as [`split_fields`] returns it (quotes removed), trimmed of any
/// Unicode whitespace first.
fn parse_value(field: &str) -> Option<Result<f32, ()>> {
    parse_bytes(field.trim().as_bytes())
}

/// `path:line` for the line starting at byte `offset` of the file (1-based; the header is
/// line 1). Counts the line breaks before `offset`: only done when reporting an error.
fn csv_location(path: &Path, offset: u64) -> String {
    let count = || -> std::io::Result<u64> {
        let mut reader = BufReader::new(File::open(path)?).take(offset);
        let mut buf = [0u8; 64 * 1024];
        let mut lines = 0u64;
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                return Ok(lines);
            }
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    };
    match count() {
        Ok(lines) => format!("{}:{}", path.display(), lines + 1),
        Err(_) => format!("{} byte {offset}", path.display()),
    }
}

fn load_csv_shard(
    paths: &[PathBuf],
    rank: usize,
    world: usize,
    input_cols: &[String],
    label_col: Option<&str>,
) -> Result<Frame, MlError> {
    if paths.is_empty() {
        return Err(no_files());
    }
    let headers = paths
        .iter()
        .map(|p| read_csv_header(p))
        .collect::<Result<Vec<_>, _>>()?;
    let columns = &headers[0].columns;
    for (path, header) in paths.iter().zip(&headers).skip(1) {
        if &header.columns != columns {
            return Err(format_err(
                path.display().to_string(),
                format!(
                    "header ({}) differs from that of {} ({})",
                    header.columns.join(", "),
                    paths[0].display(),
                    columns.join(", ")
                ),
            ));
        }
    }
    let (features, label) = column_indices(columns, input_cols, label_col)?;

    let total: u64 = headers
        .iter()
        .map(|h| h.len.saturating_sub(h.data_start))
        .sum();
    let (lo, hi) = even_range(total, rank, world);

    let mut frame_columns = vec![Vec::new(); features.len()];
    let mut labels = label.map(|_| Vec::new());
    let mut n_rows = 0usize;
    let mut detail = String::new();
    let mut line = Vec::new();
    let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(columns.len());

    // Global offset of the current file's first data byte.
    let mut base = 0u64;
    for (path, header) in paths.iter().zip(&headers) {
        let data_len = header.len.saturating_sub(header.data_start);
        let (file_lo, file_hi) = (base, base + data_len);
        base = file_hi;
        // This file's part of [lo, hi), as offsets into its data bytes.
        let start = lo.max(file_lo);
        let end = hi.min(file_hi);
        if start >= end {
            continue;
        }
        let (start, end) = (start - file_lo, end - file_lo);
        if !detail.is_empty() {
            detail.push_str(", ");
        }
        let _ = write!(
            detail,
            "file {} bytes {}..{}",
            path.display(),
            header.data_start + start,
            header.data_start + end
        );

        let mut file = File::open(path).map_err(|e| io_err(path, e))?;
        // Offset (in the data bytes) of the first line that starts at or after `start`.
        let mut pos = if start == 0 {
            file.seek(SeekFrom::Start(header.data_start))
                .map_err(|e| io_err(path, e))?;
            0
        } else {
            // Seek to the byte before `start`: a line starts at `start` iff it is a line break.
            file.seek(SeekFrom::Start(header.data_start + start - 1))
                .map_err(|e| io_err(path, e))?;
            start - 1
        };
        let mut reader = BufReader::with_capacity(1 << 20, file);
        if start > 0 {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_err(path, e))?;
            pos += n as u64;
        }
        while pos < end {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| io_err(path, e))?;
            if n == 0 {
                break;
            }
            let line_offset = header.data_start + pos;
            pos += n as u64;
            let text = trim_line_end(&line);
            if text.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let location = || csv_location(path, line_offset);
            let mut sink = RowSink {
                columns,
                features: &features,
                label,
                out: &mut frame_columns,
                labels: labels.as_mut(),
            };
            if !text.contains(&b'"') {
                // The common case, without quotes: fields are the bytes between commas.
                ranges.clear();
                let mut from = 0;
                for (i, &b) in text.iter().enumerate() {
                    if b == b',' {
                        ranges.push((from, i));
                        from = i + 1;
                    }
                }
                ranges.push((from, text.len()));
                let field = |j: usize| &text[ranges[j].0..ranges[j].1];
                sink.push(
                    ranges.len(),
                    |j| parse_bytes(field(j)),
                    |j| String::from_utf8_lossy(field(j)).trim().to_string(),
                    location,
                )?;
            } else {
                let text =
                    std::str::from_utf8(text).map_err(|_| format_err(location(), "not UTF-8"))?;
                let mut fields = Vec::with_capacity(columns.len());
                split_fields(text, &mut fields).map_err(|m| format_err(location(), m))?;
                sink.push(
                    fields.len(),
                    |j| parse_value(&fields[j]),
                    |j| fields[j].to_string(),
                    location,
                )?;
            }
            n_rows += 1;
        }
    }
    if n_rows == 0 {
        if detail.is_empty() {
            detail = format!("the files hold {total} data bytes");
        }
        return Err(MlError::EmptyShard {
            rank,
            world,
            detail: format!("{detail} hold no rows"),
        });
    }
    Ok(Frame {
        feature_names: input_cols.to_vec(),
        columns: frame_columns,
        labels,
        n_rows,
    })
}

// ---------------------------------------------------------------------------------------------
// Parquet
// ---------------------------------------------------------------------------------------------

#[cfg(not(feature = "parquet"))]
fn parquet_columns(path: &Path) -> Result<Vec<String>, MlError> {
    Err(no_parquet(path))
}

#[cfg(not(feature = "parquet"))]
fn load_parquet_shard(
    paths: &[PathBuf],
    _rank: usize,
    _world: usize,
    _input_cols: &[String],
    _label_col: Option<&str>,
) -> Result<Frame, MlError> {
    Err(paths.first().map_or_else(no_files, |p| no_parquet(p)))
}

#[cfg(not(feature = "parquet"))]
fn no_parquet(path: &Path) -> MlError {
    format_err(
        path.display().to_string(),
        "Parquet support is off: build starling-ml with its `parquet` feature",
    )
}

#[cfg(feature = "parquet")]
fn parquet_columns(path: &Path) -> Result<Vec<String>, MlError> {
    let reader = parquet_impl::open(path)?;
    Ok(parquet_impl::column_names(&reader))
}

#[cfg(feature = "parquet")]
fn load_parquet_shard(
    paths: &[PathBuf],
    rank: usize,
    world: usize,
    input_cols: &[String],
    label_col: Option<&str>,
) -> Result<Frame, MlError> {
    parquet_impl::load_shard(paths, rank, world, input_cols, label_col)
}

#[cfg(feature = "parquet")]
mod parquet_impl {
    use std::fmt::Write as _;
    use std::fs::File;
    use std::path::{Path, PathBuf};

    use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
    use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
    use parquet::data_type::DataType;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::{column_indices, even_range, format_err, io_err, no_files, Frame};
    use crate::MlError;

    /// Rows read per call into a column reader.
    const BATCH: usize = 64 * 1024;

    pub(super) fn open(path: &Path) -> Result<SerializedFileReader<File>, MlError> {
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        SerializedFileReader::new(file)
            .map_err(|e| format_err(path.display().to_string(), format!("not Parquet: {e}")))
    }

    pub(super) fn column_names(reader: &SerializedFileReader<File>) -> Vec<String> {
        reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.path().string())
            .collect()
    }

    /// One row group in the global order: file, group and its first global row.
    struct Group {
        file: usize,
        group: usize,
        first_row: u64,
        rows: u64,
    }

    pub(super) fn load_shard(
        paths: &[PathBuf],
        rank: usize,
        world: usize,
        input_cols: &[String],
        label_col: Option<&str>,
    ) -> Result<Frame, MlError> {
        if paths.is_empty() {
            return Err(no_files());
        }
        // Footers only: every rank needs the row group sizes of all files to find its part.
        let readers = paths
            .iter()
            .map(|p| open(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut groups = Vec::new();
        let mut total = 0u64;
        for (file, reader) in readers.iter().enumerate() {
            for group in 0..reader.num_row_groups() {
                let rows =
                    u64::try_from(reader.metadata().row_group(group).num_rows()).map_err(|_| {
                        format_err(
                            paths[file].display().to_string(),
                            format!("row group {group} has a negative row count"),
                        )
                    })?;
                groups.push(Group {
                    file,
                    group,
                    first_row: total,
                    rows,
                });
                total += rows;
            }
        }
        // This rank's global rows [lo, hi): whole row groups when there are enough of them.
        let (lo, hi) = if groups.len() >= world {
            let (g0, g1) = even_range(groups.len() as u64, rank, world);
            let first = groups[g0 as usize].first_row;
            let last = &groups[g1 as usize - 1];
            (first, last.first_row + last.rows)
        } else {
            even_range(total, rank, world)
        };

        let n_rows = (hi - lo) as usize;
        if n_rows == 0 {
            return Err(MlError::EmptyShard {
                rank,
                world,
                detail: empty_detail(paths, &groups, lo, hi, rank, world),
            });
        }

        let mut columns = vec![Vec::new(); input_cols.len()];
        let mut labels = label_col.map(|_| Vec::new());
        let mut current_file = usize::MAX;
        let mut indices = (Vec::new(), None);
        let mut max_defs = Vec::new();
        for g in &groups {
            let start = lo.max(g.first_row);
            let end = hi.min(g.first_row + g.rows);
            if start >= end {
                continue;
            }
            let path = &paths[g.file];
            let reader = &readers[g.file];
            if g.file != current_file {
                // Each file is checked on its own: the schemas may order columns differently.
                current_file = g.file;
                let names = column_names(reader);
                indices = column_indices(&names, input_cols, label_col)?;
                let schema = reader.metadata().file_metadata().schema_descr();
                max_defs.clear();
                for &i in indices.0.iter().chain(indices.1.iter()) {
                    let column = schema.column(i);
                    check_column(path, &column)?;
                    max_defs.push(column.max_def_level());
                }
            }
            let row_group = reader
                .get_row_group(g.group)
                .map_err(|e| parquet_err(path, g.group, e))?;
            let skip = (start - g.first_row) as usize;
            let take = (end - start) as usize;
            for ((out, &i), &max_def) in columns.iter_mut().zip(&indices.0).zip(&max_defs) {
                let column = row_group
                    .get_column_reader(i)
                    .map_err(|e| parquet_err(path, g.group, e))?;
                read_column(column, max_def, skip, take, out)
                    .map_err(|e| parquet_err(path, g.group, e))?;
            }
            if let (Some(out), Some(i)) = (labels.as_mut(), indices.1) {
                let before = out.len();
                let column = row_group
                    .get_column_reader(i)
                    .map_err(|e| parquet_err(path, g.group, e))?;
                let max_def = max_defs.last().copied().unwrap_or(0);
                read_column(column, max_def, skip, take, out)
                    .map_err(|e| parquet_err(path, g.group, e))?;
                if let Some(k) = out[before..].iter().position(|v| v.is_nan()) {
                    return Err(format_err(
                        path.display().to_string(),
                        format!(
                            "row group {} row {}: label column {:?} is null",
                            g.group,
                            skip + k,
                            label_col.unwrap_or_default()
                        ),
                    ));
                }
            }
        }
        for column in columns.iter().chain(labels.iter()) {
            if column.len() != n_rows {
                return Err(format_err(
                    paths[0].display().to_string(),
                    format!(
                        "read {} values for {n_rows} rows: the row counts of the footers are wrong",
                        column.len()
                    ),
                ));
            }
        }
        Ok(Frame {
            feature_names: input_cols.to_vec(),
            columns,
            labels,
            n_rows,
        })
    }

    /// What an empty shard was given: its row groups, or its row range.
    fn empty_detail(
        paths: &[PathBuf],
        groups: &[Group],
        lo: u64,
        hi: u64,
        rank: usize,
        world: usize,
    ) -> String {
        if groups.is_empty() {
            return "the files have no row groups".into();
        }
        if groups.len() >= world {
            let (g0, g1) = even_range(groups.len() as u64, rank, world);
            let mut detail = String::new();
            for g in &groups[g0 as usize..g1 as usize] {
                if !detail.is_empty() {
                    detail.push_str(", ");
                }
                let _ = write!(
                    detail,
                    "file {} row group {}",
                    paths[g.file].display(),
                    g.group
                );
            }
            format!("{detail} hold no rows")
        } else {
            let total: u64 = groups.iter().map(|g| g.rows).sum();
            format!("rows {lo}..{hi} of {total} in {} row groups", groups.len())
        }
    }

    fn parquet_err(path: &Path, group: usize, e: parquet::errors::ParquetError) -> MlError {
        format_err(
            path.display().to_string(),
            format!("row group {group}: {e}"),
        )
    }

    /// Only flat numeric columns are read: int32, int64, float, double and boolean.
    fn check_column(
        path: &Path,
        column: &parquet::schema::types::ColumnDescriptor,
    ) -> Result<(), MlError> {
        let name = column.path().string();
        let physical = column.physical_type();
        let bad = |what: String| {
            format_err(
                path.display().to_string(),
                format!("column {name:?} has type {what}: only int32, int64, float, double and boolean columns can be read"),
            )
        };
        if column.max_rep_level() > 0 {
            return Err(bad(format!("repeated {physical}")));
        }
        if column.path().parts().len() > 1 {
            return Err(bad(format!("{physical} nested in a group")));
        }
        let decimal = matches!(column.logical_type_ref(), Some(LogicalType::Decimal { .. }))
            || column.converted_type() == ConvertedType::DECIMAL;
        if decimal {
            return Err(bad(format!("decimal ({physical})")));
        }
        match physical {
            PhysicalType::BOOLEAN
            | PhysicalType::INT32
            | PhysicalType::INT64
            | PhysicalType::FLOAT
            | PhysicalType::DOUBLE => Ok(()),
            other => Err(bad(other.to_string())),
        }
    }

    /// Appends rows `skip .. skip + take` of a column chunk to `out`, nulls as `NaN`.
    fn read_column(
        column: ColumnReader,
        max_def: i16,
        skip: usize,
        take: usize,
        out: &mut Vec<f32>,
    ) -> parquet::errors::Result<()> {
        match column {
            ColumnReader::BoolColumnReader(r) => {
                read_typed(r, max_def, skip, take, out, |v| f32::from(u8::from(v)))
            }
            ColumnReader::Int32ColumnReader(r) => {
                read_typed(r, max_def, skip, take, out, |v| v as f32)
            }
            ColumnReader::Int64ColumnReader(r) => {
                read_typed(r, max_def, skip, take, out, |v| v as f32)
            }
            ColumnReader::FloatColumnReader(r) => read_typed(r, max_def, skip, take, out, |v| v),
            ColumnReader::DoubleColumnReader(r) => {
                read_typed(r, max_def, skip, take, out, |v| v as f32)
            }
            _ => Err(parquet::errors::ParquetError::General(
                "unsupported column type".into(),
            )),
        }
    }

    fn read_typed<T: DataType>(
        mut reader: ColumnReaderImpl<T>,
        max_def: i16,
        skip: usize,
        take: usize,
        out: &mut Vec<f32>,
        convert: impl Fn(T::T) -> f32,
    ) -> parquet::errors::Result<()>
    where
        T::T: Copy,
    {
        if skip > 0 {
            let skipped = reader.skip_records(skip)?;
            if skipped != skip {
                return Err(parquet::errors::ParquetError::EOF(format!(
                    "column chunk ends after {skipped} rows, expected at least {skip}"
                )));
            }
        }
        let mut values: Vec<T::T> = Vec::new();
        let mut defs: Vec<i16> = Vec::new();
        let mut left = take;
        while left > 0 {
            values.clear();
            defs.clear();
            let want = left.min(BATCH);
            let (records, _, levels) = reader.read_records(
                want,
                if max_def > 0 { Some(&mut defs) } else { None },
                None,
                &mut values,
            )?;
            if records == 0 {
                return Err(parquet::errors::ParquetError::EOF(format!(
                    "column chunk ends {left} rows early"
                )));
            }
            if max_def > 0 {
                let mut next = values.iter();
                for &d in &defs[..levels.min(defs.len())] {
                    if d == max_def {
                        match next.next() {
                            Some(&v) => out.push(convert(v)),
                            None => {
                                return Err(parquet::errors::ParquetError::General(
                                    "fewer values than definition levels".into(),
                                ))
                            }
                        }
                    } else {
                        out.push(f32::NAN);
                    }
                }
            } else {
                out.extend(values[..records].iter().map(|&v| convert(v)));
            }
            left -= records;
        }
        Ok(())
    }
}
