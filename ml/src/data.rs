//! Temporary: replaced by the sharded connector.
use crate::MlError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Loaded shard.
pub struct Frame {
    /// Names.
    pub feature_names: Vec<String>,
    /// Column-major.
    pub columns: Vec<Vec<f32>>,
    /// Labels.
    pub labels: Option<Vec<f32>>,
    /// Rows.
    pub n_rows: usize,
}
impl Frame {
    /// Row-major copy.
    pub fn row_major(&self) -> Vec<f32> {
        let nf = self.columns.len();
        let mut out = vec![0f32; self.n_rows * nf];
        for (f, c) in self.columns.iter().enumerate() {
            for (i, x) in c.iter().enumerate() {
                out[i * nf + f] = *x;
            }
        }
        out
    }
}
/// Table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Table {
    /// Names.
    pub columns: Vec<String>,
    /// Column-major.
    pub data: Vec<Vec<f32>>,
}
/// Connector.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DataConnector {
    /// CSV.
    Csv { paths: Vec<PathBuf> },
    /// Table.
    Table(Table),
}
impl DataConnector {
    /// Table.
    pub fn table(t: Table) -> Self {
        DataConnector::Table(t)
    }
    /// Columns.
    pub fn columns(&self) -> Result<Vec<String>, MlError> {
        match self {
            DataConnector::Table(t) => Ok(t.columns.clone()),
            _ => Err(MlError::Param("csv".into())),
        }
    }
    /// Shard.
    pub fn load_shard(
        &self,
        rank: usize,
        world: usize,
        input_cols: &[String],
        label_col: Option<&str>,
    ) -> Result<Frame, MlError> {
        let DataConnector::Table(t) = self else {
            return Err(MlError::Param("csv".into()));
        };
        let n = t.data.first().map_or(0, |c| c.len());
        let (a, b) = (rank * n / world, (rank + 1) * n / world);
        let col =
            |name: &str| -> Result<Vec<f32>, MlError> {
                let i = t.columns.iter().position(|c| c == name).ok_or_else(|| {
                    MlError::MissingColumn {
                        column: name.into(),
                        available: t.columns.join(", "),
                    }
                })?;
                Ok(t.data[i][a..b].to_vec())
            };
        let columns = input_cols
            .iter()
            .map(|c| col(c))
            .collect::<Result<Vec<_>, _>>()?;
        let labels = label_col.map(col).transpose()?;
        if b == a {
            return Err(MlError::EmptyShard {
                rank,
                world,
                detail: format!("table of {n} rows"),
            });
        }
        Ok(Frame {
            feature_names: input_cols.to_vec(),
            columns,
            labels,
            n_rows: b - a,
        })
    }
}
