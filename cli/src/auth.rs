//! The flags every client command shares to reach a head: the cluster token (`--token-file`,
//! else `STARLING_TOKEN`) and the CA to trust for TLS (`--tls-ca`, else `STARLING_TLS_CA`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use starling_proto::security::{Credentials, TlsCa, Token};

#[derive(Args, Debug, Clone, Default)]
pub struct AuthArgs {
    /// File holding the cluster token (the head writes it to DATA_DIR/token) [default: the
    /// token in $STARLING_TOKEN].
    #[arg(long, value_name = "PATH", global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM file of CA certificates to trust: connect to the head with TLS.
    #[arg(long, value_name = "PEM", env = starling_proto::env::TLS_CA, global = true)]
    pub tls_ca: Option<PathBuf>,
}

impl AuthArgs {
    /// The token from `--token-file`, else from `STARLING_TOKEN`, and the CA.
    pub fn credentials(&self) -> Result<Credentials> {
        let mut creds = Credentials::default();
        if let Some(path) = &self.token_file {
            creds.token = Some(Token::read_file(path).context("cannot read the cluster token")?);
        }
        if let Some(path) = &self.tls_ca {
            creds.tls_ca = Some(TlsCa::read(path).context("cannot read the TLS CA")?);
        }
        creds
            .or_env()
            .context("cannot read the cluster credentials from the environment")
    }

    /// A driver or job-client configuration for the head at `addr` with these credentials.
    pub fn config(&self, addr: &str) -> Result<starling::Config> {
        let creds = self.credentials()?;
        let mut config = starling::Config::connect(addr);
        if let Some(t) = &creds.token {
            config = config.token(t.expose());
        }
        if let Some(ca) = &creds.tls_ca {
            config = config.tls_ca(ca.path());
        }
        Ok(config)
    }
}
