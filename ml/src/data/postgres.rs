//! PostgreSQL shards: every rank runs the query on the server and is sent only its own rows.
//!
//! Rank `r` of `w` counts the query's rows (`n`), then reads rows `r * n / w .. (r + 1) * n / w`
//! of it (`LIMIT`/`OFFSET`), both in one read-only, repeatable-read transaction: the shards
//! `0..w` concatenated are the query's rows in its order, and no row passes through the driver.
//! The server evaluates the query twice per rank (skipped rows are never sent). For a split
//! that is well defined whatever the plan, give the query an `ORDER BY` on a unique key;
//! without one, rows come in the server's scan order, which the session keeps the same from
//! run to run by turning off synchronized and parallel scans. As with files, the data must not
//! change during a fit.
//!
//! Columns are read by type: `real` as is; `double precision`, integers, `numeric`, `oid` and
//! `boolean` as `double precision`, then `f32`; text columns are parsed as CSV fields are
//! (empty, `NA`, `NaN`, `nan` are missing). `NULL` is missing. Any other type is a
//! [`MlError::Format`]. A connection that cannot be made is [`MlError::Io`] (with the socket
//! error's kind, e.g. `ConnectionRefused`); what the server refuses (credentials, a query
//! error) is [`MlError::Database`]. Errors and `Debug` show the connection string with its
//! password replaced by `***`.
//!
//! The client speaks without TLS (`sslmode=disable` or `prefer`): use a Unix socket or a
//! trusted network; SCRAM authentication never sends the password itself.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::{Client, Config, NoTls};

use super::csv::parse_value;
use super::{column_indices, even_range, format_err, redact, Frame};
use crate::MlError;

/// How long a connection attempt may take when the connection string sets no
/// `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The alias the query is wrapped under.
const ALIAS: &str = "starling_rows";

/// How a column's values are asked for and read.
#[derive(Clone, Copy)]
enum Read {
    /// `real`, read as `f32`.
    Real,
    /// Cast to `double precision` (or already that), read as `f64`.
    Double,
    /// Cast to `text`, parsed as a CSV field.
    Text,
}

/// Checks that `url` parses as a connection string (without connecting).
pub(super) fn check_url(url: &str) -> Result<(), MlError> {
    url.parse::<Config>()
        .map(drop)
        .map_err(|e| MlError::Param(format!("connection string {}: {e}", redact(url))))
}

/// The query's column names, from the server's description of it (the query is not run).
pub(super) fn columns(url: &str, query: &str) -> Result<Vec<String>, MlError> {
    off_runtime(|| {
        let mut client = connect(url)?;
        Ok(describe(&mut client, url, trim_query(query))?.1)
    })
}

/// The server's description of `query` (not run): its statement and column names.
fn describe(
    client: &mut Client,
    url: &str,
    query: &str,
) -> Result<(postgres::Statement, Vec<String>), MlError> {
    let statement = client
        .prepare(&format!("SELECT * FROM ({query}) AS {ALIAS}"))
        .map_err(|e| db_err(url, e))?;
    let names = statement
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    Ok((statement, names))
}

/// Reads shard `rank` of `world` of the query's rows.
pub(super) fn load_shard(
    url: &str,
    query: &str,
    rank: usize,
    world: usize,
    input_cols: &[String],
    label_col: Option<&str>,
) -> Result<Frame, MlError> {
    off_runtime(|| {
        let mut client = connect(url)?;
        // A scan starts at the table's first block and runs in one process, so rows come in
        // the same order every time (no other session's scan position, no gather); the count
        // and the rows are read from one snapshot.
        client
            .batch_execute(
                "SET synchronize_seqscans = off; SET max_parallel_workers_per_gather = 0; \
                 BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            )
            .map_err(|e| db_err(url, e))?;
        let query = trim_query(query);
        let (described, names) = describe(&mut client, url, query)?;
        let (features, label) = column_indices(&names, input_cols, label_col)?;
        let asked: Vec<usize> = features.iter().copied().chain(label).collect();
        let mut select = Vec::with_capacity(asked.len());
        let mut reads = Vec::with_capacity(asked.len());
        for &j in &asked {
            let column = &described.columns()[j];
            let (expr, read) =
                read_of(column.type_(), &quote_ident(column.name())).ok_or_else(|| {
                    format_err(
                        redact(url),
                        format!(
                            "column {:?} has type {}, which is not a number",
                            column.name(),
                            column.type_().name()
                        ),
                    )
                })?;
            select.push(expr);
            reads.push(read);
        }
        let total: i64 = client
            .query_one(&format!("SELECT count(*) FROM ({query}) AS {ALIAS}"), &[])
            .and_then(|row| row.try_get(0))
            .map_err(|e| db_err(url, e))?;
        let (lo, hi) = even_range(total.max(0) as u64, rank, world);
        if lo == hi {
            return Err(MlError::EmptyShard {
                rank,
                world,
                detail: format!("the query at {} has {total} rows", redact(url)),
            });
        }
        let select = if select.is_empty() {
            "NULL".to_string()
        } else {
            select.join(", ")
        };
        let sql = format!(
            "SELECT {select} FROM ({query}) AS {ALIAS} LIMIT {} OFFSET {lo}",
            hi - lo
        );
        let statement = client.prepare(&sql).map_err(|e| db_err(url, e))?;
        let no_params: [&(dyn ToSql + Sync); 0] = [];
        let mut rows = client
            .query_raw(&statement, no_params)
            .map_err(|e| db_err(url, e))?;

        let n_features = features.len();
        let mut columns = vec![Vec::new(); n_features];
        let mut labels = label.map(|_| Vec::new());
        let mut n_rows = 0usize;
        let location =
            |i: usize| format!("{} row {} of the query", redact(url), lo as usize + i + 1);
        while let Some(row) = rows.next().map_err(|e| db_err(url, e))? {
            for (k, read) in reads.iter().enumerate() {
                let value: Option<f32> = match read {
                    Read::Real => row
                        .try_get::<_, Option<f32>>(k)
                        .map_err(|e| db_err(url, e))?,
                    Read::Double => row
                        .try_get::<_, Option<f64>>(k)
                        .map_err(|e| db_err(url, e))?
                        .map(|v| v as f32),
                    Read::Text => {
                        match row
                            .try_get::<_, Option<&str>>(k)
                            .map_err(|e| db_err(url, e))?
                        {
                            None => None,
                            Some(text) => match parse_value(text) {
                                None => None,
                                Some(Ok(v)) => Some(v),
                                Some(Err(())) => {
                                    return Err(MlError::NotNumeric {
                                        location: location(n_rows),
                                        column: names[asked[k]].clone(),
                                        value: text.to_string(),
                                    })
                                }
                            },
                        }
                    }
                };
                if k < n_features {
                    columns[k].push(value.unwrap_or(f32::NAN));
                } else if let Some(labels) = labels.as_mut() {
                    match value {
                        Some(v) if !v.is_nan() => labels.push(v),
                        _ => {
                            return Err(format_err(
                                location(n_rows),
                                format!("label column {:?} is missing", names[asked[k]]),
                            ))
                        }
                    }
                }
            }
            n_rows += 1;
        }
        if n_rows as u64 != hi - lo {
            return Err(format_err(
                redact(url),
                format!(
                    "shard {rank} of {world}: read {n_rows} of rows {lo}..{hi}; \
                     the query's rows changed during the read"
                ),
            ));
        }
        Ok(Frame {
            feature_names: input_cols.to_vec(),
            columns,
            labels,
            n_rows,
        })
    })
}

/// The select expression for a column of type `ty` named `ident` (quoted), and how to read it;
/// `None` for a type that is not a number.
fn read_of(ty: &Type, ident: &str) -> Option<(String, Read)> {
    Some(match *ty {
        Type::FLOAT4 => (ident.to_string(), Read::Real),
        Type::FLOAT8 => (ident.to_string(), Read::Double),
        Type::INT2 | Type::INT4 | Type::INT8 | Type::NUMERIC | Type::OID => {
            (format!("{ident}::float8"), Read::Double)
        }
        Type::BOOL => (format!("{ident}::int::float8"), Read::Double),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            (format!("{ident}::text"), Read::Text)
        }
        _ => return None,
    })
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The query without trailing semicolons and white space, so that it can be wrapped.
fn trim_query(query: &str) -> &str {
    query.trim_end_matches(|c: char| c == ';' || c.is_whitespace())
}

/// Connects with `url`, giving up after [`CONNECT_TIMEOUT`] unless the string says otherwise.
fn connect(url: &str) -> Result<Client, MlError> {
    let mut config: Config = url
        .parse()
        .map_err(|e| MlError::Param(format!("connection string {}: {e}", redact(url))))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.connect(NoTls).map_err(|e| db_err(url, e))
}

/// A client error as [`MlError`]: the socket's own error when there is one (a refused or
/// unreachable server), the server's message otherwise.
fn db_err(url: &str, e: postgres::Error) -> MlError {
    let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
    if let Some(io) = io {
        return MlError::Io {
            path: redact(url),
            source: std::io::Error::new(io.kind(), io.to_string()),
        };
    }
    let message = match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    };
    MlError::Database {
        url: redact(url),
        message,
    }
}

/// Runs `f` on a thread of its own: the blocking client runs its own small runtime, which it
/// cannot do on a thread that is already inside one (an async task's, or a worker's).
fn off_runtime<T: Send>(f: impl FnOnce() -> Result<T, MlError> + Send) -> Result<T, MlError> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_wrapped_without_its_semicolons_and_identifiers_are_quoted() {
        assert_eq!(trim_query("SELECT 1;  \n"), "SELECT 1");
        assert_eq!(trim_query("SELECT 1"), "SELECT 1");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn numbers_are_read_and_other_types_refused() {
        assert!(matches!(
            read_of(&Type::FLOAT4, "\"x\""),
            Some((_, Read::Real))
        ));
        let (expr, _) = read_of(&Type::INT8, "\"x\"").expect("int8 is a number");
        assert_eq!(expr, "\"x\"::float8");
        let (expr, _) = read_of(&Type::BOOL, "\"x\"").expect("bool is a number");
        assert_eq!(expr, "\"x\"::int::float8");
        assert!(matches!(
            read_of(&Type::TEXT, "\"x\""),
            Some((_, Read::Text))
        ));
        assert!(read_of(&Type::TIMESTAMP, "\"x\"").is_none());
        assert!(read_of(&Type::BYTEA, "\"x\"").is_none());
    }

    #[test]
    fn a_bad_connection_string_is_a_parameter_error() {
        assert!(check_url("host=/tmp dbname=x").is_ok());
        assert!(check_url("postgresql://u:secret@localhost/db").is_ok());
        match check_url("postgresql://u:secret@localhost:notaport/db") {
            Err(MlError::Param(m)) => assert!(!m.contains("secret"), "{m}"),
            other => panic!("expected a parameter error, got {other:?}"),
        }
    }
}
