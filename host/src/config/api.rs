//! The `[api]` table: who may call `taskhost serve`'s HTTP API.
//!
//! ```toml
//! [api]
//! tokens = [
//!   { name = "ci", token = "…32 random characters…", role = "write" },
//!   { name = "grafana", token = "…", role = "read" },
//! ]
//! ```
//!
//! A request carries `Authorization: Bearer TOKEN`. `read` may only read; `write` may also queue,
//! cancel, retry and pause; `deploy` may also deploy handlers and roll them back. With no token the
//! API answers everyone as `deploy`, and `serve` then listens only on a loopback address.

use serde::Deserialize;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// May read.
    Read,
    /// May read and act (queue, cancel, retry, delete, pause).
    Write,
    /// May also deploy handlers and roll them back: make any code run on every worker, with its
    /// handler name's grants.
    Deploy,
}

/// One caller's token. Its `Debug` leaves the token out.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiToken {
    /// Who it is for, in logs.
    pub name: String,
    /// The secret the caller presents (`Authorization: Bearer`).
    pub token: String,
    /// What it may do.
    pub role: Role,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken").field("name", &self.name).field("role", &self.role).finish_non_exhaustive()
    }
}

/// The `[api]` table: who may call the HTTP API.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSection {
    /// The tokens; none: only loopback callers, without a token.
    #[serde(default)]
    pub tokens: Vec<ApiToken>,
}

impl ApiSection {
    /// Shortest token accepted: a guessable one is refused at start.
    pub const MIN_TOKEN_BYTES: usize = 16;

    /// Check the tokens (length, no duplicates); one line naming what is wrong otherwise.
    pub fn check(&self) -> Result<(), String> {
        for (i, t) in self.tokens.iter().enumerate() {
            if t.token.len() < Self::MIN_TOKEN_BYTES || t.token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!(
                    "[api] tokens[{i}] ({}): a token is at least {} characters, without spaces",
                    t.name,
                    Self::MIN_TOKEN_BYTES
                ));
            }
            if self.tokens[..i].iter().any(|o| o.token == t.token) {
                return Err(format!("[api] tokens[{i}] ({}): the same token twice", t.name));
            }
        }
        Ok(())
    }

    /// The role of the caller presenting `token` (None: no such token).
    pub fn role_of(&self, token: &str) -> Option<Role> {
        self.token_of(token).map(|t| t.role)
    }

    /// The caller presenting `token` (None: no such token).
    pub fn token_of(&self, token: &str) -> Option<&ApiToken> {
        // Compared in full whatever the first difference, so the time says nothing.
        self.tokens.iter().find(|t| constant_time_eq(t.token.as_bytes(), token.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
