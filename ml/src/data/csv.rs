//! CSV shards: the data bytes of all files, seen as one concatenation, cut into `world` equal
//! byte ranges; a line belongs to the rank whose range holds its first byte.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{column_indices, even_range, format_err, io_err, no_files, Frame};
use crate::MlError;

/// A CSV file's header: its column names and where its data bytes start and end.
pub(super) struct CsvHeader {
    pub(super) columns: Vec<String>,
    data_start: u64,
    len: u64,
}

pub(super) fn read_csv_header(path: &Path) -> Result<CsvHeader, MlError> {
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
pub(super) fn parse_value(field: &str) -> Option<Result<f32, ()>> {
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

pub(super) fn load_csv_shard(
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
