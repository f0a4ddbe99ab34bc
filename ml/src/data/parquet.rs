//! Parquet shards: the row groups of all files, in order, cut into `world` contiguous blocks
//! (or, with fewer row groups than ranks, the rows into `world` contiguous ranges).

use std::path::{Path, PathBuf};

use super::Frame;
#[cfg(not(feature = "parquet"))]
use super::{format_err, no_files};
use crate::MlError;

#[cfg(not(feature = "parquet"))]
pub(super) fn parquet_columns(path: &Path) -> Result<Vec<String>, MlError> {
    Err(no_parquet(path))
}

#[cfg(not(feature = "parquet"))]
pub(super) fn load_parquet_shard(
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
pub(super) fn parquet_columns(path: &Path) -> Result<Vec<String>, MlError> {
    let reader = parquet_impl::open(path)?;
    Ok(parquet_impl::column_names(&reader))
}

#[cfg(feature = "parquet")]
pub(super) fn load_parquet_shard(
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

    use super::super::{column_indices, even_range, format_err, io_err, no_files, Frame};
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
