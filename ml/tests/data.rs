//! Sharded data connectors: every shard layout concatenates back to all rows in order, missing
//! values, and each error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use starling_ml::{DataConnector, Frame, MlError, Table};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "starling-ml-data-{tag}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One row as bits: the features, then the label if any (NaN compares equal by bits).
type Row = (Vec<u32>, Option<u32>);

fn names(cols: &[&str]) -> Vec<String> {
    cols.iter().map(|c| c.to_string()).collect()
}

/// Rows as (features, label), NaN compared by bits so missing values compare equal.
fn rows(frame: &Frame) -> Vec<Row> {
    (0..frame.n_rows)
        .map(|i| {
            (
                frame.columns.iter().map(|c| c[i].to_bits()).collect(),
                frame.labels.as_ref().map(|l| l[i].to_bits()),
            )
        })
        .collect()
}

/// Concatenation of shards `0..world`; an empty shard adds no rows.
fn all_shards(
    connector: &DataConnector,
    world: usize,
    cols: &[String],
    label: Option<&str>,
) -> Vec<Row> {
    let mut out = Vec::new();
    for rank in 0..world {
        match connector.load_shard(rank, world, cols, label) {
            Ok(frame) => {
                assert_eq!(frame.feature_names, cols);
                assert_eq!(frame.columns.len(), cols.len());
                for c in &frame.columns {
                    assert_eq!(c.len(), frame.n_rows);
                }
                out.extend(rows(&frame));
            }
            Err(MlError::EmptyShard { .. }) => {}
            Err(e) => panic!("shard {rank} of {world}: {e}"),
        }
    }
    out
}

/// `n` CSV data lines `id,x,y` starting at `first`, with every fifth x missing in one of the
/// accepted spellings.
fn csv_lines(first: usize, n: usize) -> (Vec<String>, Vec<Row>) {
    let missing = ["", "NA", "NaN", "nan"];
    let mut lines = Vec::new();
    let mut expected = Vec::new();
    for i in first..first + n {
        let (x_text, x) = if i % 5 == 0 {
            (missing[(i / 5) % 4].to_string(), f32::NAN)
        } else {
            let x = i as f32 * 0.25 - 3.0;
            (format!("{x}"), x)
        };
        let y = (i % 3) as f32;
        lines.push(format!("{i},{x_text},{y}"));
        expected.push((vec![(i as f32).to_bits(), x.to_bits()], Some(y.to_bits())));
    }
    (lines, expected)
}

fn csv_text(lines: &[String], eol: &str, trailing: bool) -> String {
    let mut text = format!("id,x,y{eol}");
    text.push_str(&lines.join(eol));
    if trailing {
        text.push_str(eol);
    }
    text
}

#[test]
fn csv_shards_concatenate_to_all_rows_in_order() {
    let dir = TempDir::new("csv-concat");
    let cols = names(&["id", "x"]);
    // One file in each line layout.
    for (k, (eol, trailing)) in [("\n", true), ("\n", false), ("\r\n", true), ("\r\n", false)]
        .into_iter()
        .enumerate()
    {
        let (lines, expected) = csv_lines(0, 23);
        let path = dir.write(&format!("one{k}.csv"), &csv_text(&lines, eol, trailing));
        let connector = DataConnector::csv(path.to_str().unwrap()).unwrap();
        assert_eq!(connector.columns().unwrap(), names(&["id", "x", "y"]));
        for world in 1..=7 {
            assert_eq!(
                all_shards(&connector, world, &cols, Some("y")),
                expected,
                "file {k}, world {world}"
            );
        }
    }
    // Three files: CRLF with a trailing newline, LF without, LF with.
    let (a, mut expected) = csv_lines(0, 9);
    let (b, eb) = csv_lines(9, 4);
    let (c, ec) = csv_lines(13, 11);
    expected.extend(eb);
    expected.extend(ec);
    let sub = dir.0.join("three");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("part-0.csv"), csv_text(&a, "\r\n", true)).unwrap();
    std::fs::write(sub.join("part-1.csv"), csv_text(&b, "\n", false)).unwrap();
    std::fs::write(sub.join("part-2.csv"), csv_text(&c, "\n", true)).unwrap();
    std::fs::write(sub.join("notes.txt"), "not data").unwrap();
    let by_dir = DataConnector::csv(sub.to_str().unwrap()).unwrap();
    let by_glob = DataConnector::csv(sub.join("part-*.csv").to_str().unwrap()).unwrap();
    for connector in [&by_dir, &by_glob] {
        match connector {
            DataConnector::Csv { paths } => {
                let files: Vec<_> = paths.iter().map(|p| p.file_name().unwrap()).collect();
                assert_eq!(files, ["part-0.csv", "part-1.csv", "part-2.csv"]);
            }
            other => panic!("{other:?}"),
        }
        for world in 1..=7 {
            assert_eq!(
                all_shards(connector, world, &cols, Some("y")),
                expected,
                "world {world}"
            );
        }
    }
    // Enough lines per byte range: no shard is empty, and the sizes add up.
    for world in 1..=7 {
        let sizes: Vec<usize> = (0..world)
            .map(|rank| by_dir.load_shard(rank, world, &cols, None).unwrap().n_rows)
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 24, "world {world}: {sizes:?}");
    }
}

#[test]
fn csv_missing_values_quotes_and_label_free_loads() {
    let dir = TempDir::new("csv-missing");
    let path = dir.write(
        "m.csv",
        "a,\"b, quoted\",label\n1,,0\nNA, 2.5 ,1\n\"3\",\"nan\",0\n\n4,NaN,1\n",
    );
    let connector = DataConnector::csv(path.to_str().unwrap()).unwrap();
    assert_eq!(
        connector.columns().unwrap(),
        names(&["a", "b, quoted", "label"])
    );
    let frame = connector
        .load_shard(0, 1, &names(&["b, quoted", "a"]), None)
        .unwrap();
    assert_eq!(frame.n_rows, 4);
    assert!(frame.labels.is_none());
    let b = &frame.columns[0];
    assert!(b[0].is_nan() && b[2].is_nan() && b[3].is_nan());
    assert_eq!(b[1], 2.5);
    let a = &frame.columns[1];
    assert_eq!((a[0], a[2], a[3]), (1.0, 3.0, 4.0));
    assert!(a[1].is_nan());
    let row_major = frame.row_major();
    assert_eq!(row_major.len(), 8);
    assert_eq!(row_major[2], 2.5);
    assert_eq!(row_major[3].to_bits(), f32::NAN.to_bits());
    assert_eq!(row_major[5], 3.0);
}

#[test]
fn csv_errors() {
    let dir = TempDir::new("csv-errors");
    let good = dir.write("a.csv", "x,y\n1,0\n2,1\n");
    let bad = dir.write("b.csv", "x,y\n3,0\n4,1\n\nfive,0\n6,1\n");
    let connector = DataConnector::csv_files(vec![good.clone(), bad.clone()]);
    let x = names(&["x"]);

    // Unknown column: lists what there is.
    match connector.load_shard(0, 1, &names(&["x", "z"]), Some("y")) {
        Err(MlError::MissingColumn { column, available }) => {
            assert_eq!(column, "z");
            assert_eq!(available, "x, y");
        }
        other => panic!("{other:?}"),
    }
    match connector.load_shard(0, 1, &x, Some("label")) {
        Err(MlError::MissingColumn { column, .. }) => assert_eq!(column, "label"),
        other => panic!("{other:?}"),
    }

    // Not a number: file and 1-based line (the header is line 1), from any rank holding it.
    let expected = format!("{}:5", bad.display());
    let mut seen = 0;
    for world in 1..=4 {
        for rank in 0..world {
            match connector.load_shard(rank, world, &x, Some("y")) {
                Err(MlError::NotNumeric {
                    location,
                    column,
                    value,
                }) => {
                    assert_eq!(
                        (location.as_str(), column.as_str()),
                        (expected.as_str(), "x")
                    );
                    assert_eq!(value, "five");
                    seen += 1;
                }
                Ok(_) | Err(MlError::EmptyShard { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert_eq!(seen, 4, "each world has one rank that reads the bad line");

    // A missing label names its line.
    let no_label = dir.write("c.csv", "x,y\n1,0\n2,\n");
    match DataConnector::csv_files(vec![no_label.clone()]).load_shard(0, 1, &x, Some("y")) {
        Err(MlError::Format { path, message }) => {
            assert_eq!(path, format!("{}:3", no_label.display()));
            assert!(message.contains("\"y\""), "{message}");
        }
        other => panic!("{other:?}"),
    }

    // Wrong number of fields.
    let short = dir.write("d.csv", "x,y\n1\n");
    match DataConnector::csv_files(vec![short.clone()]).load_shard(0, 1, &x, None) {
        Err(MlError::Format { path, .. }) => assert_eq!(path, format!("{}:2", short.display())),
        other => panic!("{other:?}"),
    }

    // Files must share their header.
    let other = dir.write("e.csv", "y,x\n0,1\n");
    assert!(matches!(
        DataConnector::csv_files(vec![good.clone(), other]).load_shard(0, 1, &x, None),
        Err(MlError::Format { .. })
    ));
    // A file without a header line.
    let empty = dir.write("f.csv", "");
    assert!(matches!(
        DataConnector::csv_files(vec![empty]).load_shard(0, 1, &x, None),
        Err(MlError::Format { .. })
    ));

    // An empty shard says what it read.
    let one = dir.write("g.csv", "x,y\n1,0\n");
    let single = DataConnector::csv_files(vec![one.clone()]);
    assert_eq!(single.load_shard(0, 2, &x, None).unwrap().n_rows, 1);
    match single.load_shard(1, 2, &x, None) {
        Err(MlError::EmptyShard {
            rank,
            world,
            detail,
        }) => {
            assert_eq!((rank, world), (1, 2));
            assert_eq!(
                detail,
                format!("file {} bytes 6..8 hold no rows", one.display())
            );
        }
        other => panic!("{other:?}"),
    }
    let header_only = dir.write("h.csv", "x,y\n");
    assert!(matches!(
        DataConnector::csv_files(vec![header_only]).load_shard(0, 1, &x, None),
        Err(MlError::EmptyShard { .. })
    ));

    // Rank and world.
    for (rank, world) in [(0, 0), (2, 2), (5, 3)] {
        assert!(matches!(
            single.load_shard(rank, world, &x, None),
            Err(MlError::Param(_))
        ));
    }
    assert!(matches!(
        DataConnector::csv_files(vec![]).load_shard(0, 1, &x, None),
        Err(MlError::Param(_))
    ));

    // Patterns.
    assert!(matches!(
        DataConnector::csv(dir.0.join("[a-").to_str().unwrap()),
        Err(MlError::Param(_))
    ));
    match DataConnector::csv(dir.0.join("nothing-*.csv").to_str().unwrap()) {
        Err(MlError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        DataConnector::csv(dir.0.join("missing.csv").to_str().unwrap()),
        Err(MlError::Io { .. })
    ));
    let empty_dir = TempDir::new("csv-empty-dir");
    assert!(matches!(
        DataConnector::csv(empty_dir.0.to_str().unwrap()),
        Err(MlError::Io { .. })
    ));
    match DataConnector::csv(dir.0.join("?.csv").to_str().unwrap()) {
        Ok(DataConnector::Csv { paths }) => assert_eq!(paths.len(), 8),
        other => panic!("{other:?}"),
    }
}

#[test]
fn connector_is_plain_data() {
    let connector = DataConnector::csv_files(vec![PathBuf::from("/data/a.csv")]);
    let json = serde_json::to_string(&connector).unwrap();
    match serde_json::from_str::<DataConnector>(&json).unwrap() {
        DataConnector::Csv { paths } => assert_eq!(paths, [Path::new("/data/a.csv")]),
        other => panic!("{other:?}"),
    }
    let table = Table::new(names(&["a"]), vec![vec![1.0, 2.0]]).unwrap();
    let json = serde_json::to_string(&DataConnector::table(table.clone())).unwrap();
    match serde_json::from_str::<DataConnector>(&json).unwrap() {
        DataConnector::Table(t) => assert_eq!(t, table),
        other => panic!("{other:?}"),
    }
}

#[test]
fn table_shards() {
    assert!(matches!(
        Table::new(names(&["a", "b"]), vec![vec![1.0], vec![]]),
        Err(MlError::Shape(_))
    ));
    assert!(matches!(
        Table::new(names(&["a", "b"]), vec![vec![1.0]]),
        Err(MlError::Shape(_))
    ));
    let n = 11;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n)
        .map(|i| if i % 4 == 0 { f32::NAN } else { -(i as f32) })
        .collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 2) as f32).collect();
    let table = Table::new(names(&["a", "b", "y"]), vec![a, b, y]).unwrap();
    let connector = DataConnector::table(table.clone());
    assert_eq!(connector.columns().unwrap(), names(&["a", "b", "y"]));
    let cols = names(&["b", "a"]);
    let whole = connector.load_shard(0, 1, &cols, Some("y")).unwrap();
    assert_eq!(whole.n_rows, n);
    for world in 1..=n {
        let mut sizes = Vec::new();
        for rank in 0..world {
            let shard = connector.load_shard(rank, world, &cols, Some("y")).unwrap();
            let lo = rank * n / world;
            assert_eq!(shard.columns[1][0], lo as f32);
            sizes.push(shard.n_rows);
        }
        assert_eq!(
            all_shards(&connector, world, &cols, Some("y")),
            rows(&whole)
        );
        assert_eq!(sizes.iter().sum::<usize>(), n);
    }
    match connector.load_shard(0, 12, &cols, None) {
        Err(MlError::EmptyShard { detail, .. }) => assert_eq!(detail, "table of 11 rows"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        connector.load_shard(0, 1, &names(&["c"]), None),
        Err(MlError::MissingColumn { .. })
    ));
    // A missing label is an error; missing features are not.
    let table = Table::new(
        names(&["a", "y"]),
        vec![vec![f32::NAN, 1.0], vec![0.0, f32::NAN]],
    )
    .unwrap();
    let connector = DataConnector::table(table);
    assert!(connector
        .load_shard(0, 2, &names(&["a"]), Some("y"))
        .is_ok());
    assert!(matches!(
        connector.load_shard(1, 2, &names(&["a"]), Some("y")),
        Err(MlError::Format { .. })
    ));
    // A table deserialized with ragged columns errors instead of panicking.
    let ragged = DataConnector::Table(Table {
        columns: names(&["a", "b"]),
        data: vec![vec![1.0, 2.0], vec![1.0]],
    });
    assert!(matches!(
        ragged.load_shard(0, 1, &names(&["a"]), None),
        Err(MlError::Shape(_))
    ));
}

#[cfg(feature = "parquet")]
mod parquet_files {
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::data_type::{
        BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type,
    };
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use super::*;

    const SCHEMA: &str = "
        message rows {
            REQUIRED INT64 id;
            OPTIONAL INT32 small;
            OPTIONAL DOUBLE x;
            OPTIONAL BOOLEAN flag;
            REQUIRED FLOAT y;
            OPTIONAL BYTE_ARRAY name (UTF8);
        }
    ";

    /// Values of row `i`: id, small (null every 3rd), x (null every 4th), flag, y, name.
    fn row(i: i64) -> (i64, Option<i32>, Option<f64>, Option<bool>, f32, String) {
        (
            i,
            (i % 3 != 0).then_some(i as i32 * 10),
            (i % 4 != 1).then_some(i as f64 / 8.0),
            (i % 5 != 2).then_some(i % 2 == 0),
            (i % 2) as f32,
            format!("row{i}"),
        )
    }

    fn defs<T>(values: &[Option<T>]) -> Vec<i16> {
        values.iter().map(|v| i16::from(v.is_some())).collect()
    }

    /// Writes rows `first..` in row groups of the given sizes; pages of 3 rows, so reads skip
    /// over pages.
    fn write_file(path: &Path, first: i64, groups: &[usize], compression: Compression) {
        let schema = Arc::new(parse_message_type(SCHEMA).unwrap());
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(compression)
                .set_data_page_row_count_limit(3)
                .set_write_batch_size(3)
                .build(),
        );
        let file = std::fs::File::create(path).unwrap();
        let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
        let mut next = first;
        for &size in groups {
            let rows: Vec<_> = (next..next + size as i64).map(row).collect();
            next += size as i64;
            let mut group = writer.next_row_group().unwrap();
            let mut k = 0;
            while let Some(mut column) = group.next_column().unwrap() {
                match k {
                    0 => {
                        let v: Vec<i64> = rows.iter().map(|r| r.0).collect();
                        column
                            .typed::<Int64Type>()
                            .write_batch(&v, None, None)
                            .unwrap();
                    }
                    1 => {
                        let o: Vec<_> = rows.iter().map(|r| r.1).collect();
                        let v: Vec<i32> = o.iter().flatten().copied().collect();
                        column
                            .typed::<Int32Type>()
                            .write_batch(&v, Some(&defs(&o)), None)
                            .unwrap();
                    }
                    2 => {
                        let o: Vec<_> = rows.iter().map(|r| r.2).collect();
                        let v: Vec<f64> = o.iter().flatten().copied().collect();
                        column
                            .typed::<DoubleType>()
                            .write_batch(&v, Some(&defs(&o)), None)
                            .unwrap();
                    }
                    3 => {
                        let o: Vec<_> = rows.iter().map(|r| r.3).collect();
                        let v: Vec<bool> = o.iter().flatten().copied().collect();
                        column
                            .typed::<BoolType>()
                            .write_batch(&v, Some(&defs(&o)), None)
                            .unwrap();
                    }
                    4 => {
                        let v: Vec<f32> = rows.iter().map(|r| r.4).collect();
                        column
                            .typed::<parquet::data_type::FloatType>()
                            .write_batch(&v, None, None)
                            .unwrap();
                    }
                    _ => {
                        let v: Vec<ByteArray> =
                            rows.iter().map(|r| ByteArray::from(r.5.as_str())).collect();
                        let d = vec![1i16; v.len()];
                        column
                            .typed::<ByteArrayType>()
                            .write_batch(&v, Some(&d), None)
                            .unwrap();
                    }
                }
                column.close().unwrap();
                k += 1;
            }
            group.close().unwrap();
        }
        writer.close().unwrap();
    }

    fn expected(n: i64) -> Vec<Row> {
        let nan = f32::NAN;
        (0..n)
            .map(row)
            .map(|(id, small, x, flag, y, _)| {
                (
                    vec![
                        (id as f32).to_bits(),
                        small.map_or(nan, |v| v as f32).to_bits(),
                        x.map_or(nan, |v| v as f32).to_bits(),
                        flag.map_or(nan, |v| f32::from(u8::from(v))).to_bits(),
                    ],
                    Some(y.to_bits()),
                )
            })
            .collect()
    }

    #[test]
    fn parquet_shards_concatenate_to_all_rows_in_order() {
        let dir = TempDir::new("parquet-concat");
        // 3 + 4 + 5 rows in three row groups, then 2 + 6 in two (Snappy): 20 rows, 5 groups.
        write_file(
            &dir.0.join("a.parquet"),
            0,
            &[3, 4, 5],
            Compression::UNCOMPRESSED,
        );
        write_file(&dir.0.join("b.parquet"), 12, &[2, 6], Compression::SNAPPY);
        dir.write("_SUCCESS", "");
        let connector = DataConnector::parquet(dir.0.to_str().unwrap()).unwrap();
        match &connector {
            DataConnector::Parquet { paths } => assert_eq!(paths.len(), 2),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            connector.columns().unwrap(),
            names(&["id", "small", "x", "flag", "y", "name"])
        );
        let cols = names(&["id", "small", "x", "flag"]);
        let all = expected(20);
        for world in 1..=7 {
            assert_eq!(
                all_shards(&connector, world, &cols, Some("y")),
                all,
                "world {world}"
            );
        }
        // Whole row groups while there are enough of them: 5 groups over 2 ranks.
        let sizes: Vec<_> = (0..2)
            .map(|r| connector.load_shard(r, 2, &cols, None).unwrap().n_rows)
            .collect();
        assert_eq!(sizes, [7, 13]);
        // Fewer groups than ranks: rows are split evenly.
        let sizes: Vec<_> = (0..6)
            .map(|r| connector.load_shard(r, 6, &cols, None).unwrap().n_rows)
            .collect();
        assert_eq!(sizes, [3, 3, 4, 3, 3, 4]);

        // A single file, by glob, with fewer rows than ranks.
        write_file(&dir.0.join("c.parquet"), 0, &[2], Compression::UNCOMPRESSED);
        let small = DataConnector::parquet(dir.0.join("c.*").to_str().unwrap()).unwrap();
        assert_eq!(all_shards(&small, 5, &cols, Some("y")), expected(2));
        match small.load_shard(0, 5, &cols, None) {
            Err(MlError::EmptyShard {
                rank,
                world,
                detail,
            }) => {
                assert_eq!((rank, world), (0, 5));
                assert_eq!(detail, "rows 0..0 of 2 in 1 row groups");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parquet_projection_and_types() {
        let dir = TempDir::new("parquet-projection");
        let path = dir.0.join("p.parquet");
        write_file(&path, 0, &[4, 4], Compression::SNAPPY);
        let connector = DataConnector::parquet(path.to_str().unwrap()).unwrap();
        // Only the asked columns, in the asked order; the string column is never decoded.
        let frame = connector
            .load_shard(1, 2, &names(&["x", "id"]), None)
            .unwrap();
        assert_eq!(frame.feature_names, names(&["x", "id"]));
        assert_eq!(frame.columns.len(), 2);
        assert!(frame.labels.is_none());
        assert_eq!(frame.columns[1], [4.0, 5.0, 6.0, 7.0]);
        assert!(frame.columns[0][1].is_nan());
        assert_eq!(frame.columns[0][0], 0.5);
        // A string column cannot be a feature.
        match connector.load_shard(0, 1, &names(&["id", "name"]), None) {
            Err(MlError::Format { message, .. }) => {
                assert!(message.contains("\"name\""), "{message}");
                assert!(message.contains("BYTE_ARRAY"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        match connector.load_shard(0, 1, &names(&["id", "nope"]), None) {
            Err(MlError::MissingColumn { column, available }) => {
                assert_eq!(column, "nope");
                assert_eq!(available, "id, small, x, flag, y, name");
            }
            other => panic!("{other:?}"),
        }
        // A null label is an error.
        assert!(matches!(
            connector.load_shard(0, 1, &names(&["id"]), Some("small")),
            Err(MlError::Format { .. })
        ));
        // Not a Parquet file.
        let bogus = dir.write("bogus.parquet", "id,x\n1,2\n");
        assert!(matches!(
            DataConnector::parquet_files(vec![bogus]).load_shard(0, 1, &names(&["id"]), None),
            Err(MlError::Format { .. })
        ));
    }
}
