//! Principals from bearer tokens, as flags of every command that serves HTTP to agents
//! (`serve`, and `mcp --listen`), so both take the same names and checks and hand the same
//! [`JwtConfig`] to the one verifier (`toolgate_server::bearer::Verifier`).

use toolgate_server::JwtConfig;

/// `--jwks` and what a token must say.
#[derive(clap::Args, Debug, Clone)]
pub struct JwtArgs {
    /// Take the principal from `Authorization: Bearer` tokens verified against this JWKS (a
    /// file, or an https URL): RS256, ES256, EdDSA; `exp`, `nbf`, `iss`, `aud` checked. A
    /// request may then not carry `facts.principal` (docs/server.md, "Principals from bearer
    /// tokens").
    #[arg(long, value_name = "FILE|URL", requires_all = ["jwt_issuer", "jwt_audience"])]
    jwks: Option<String>,
    /// The `iss` a token must have (with --jwks).
    #[arg(long, value_name = "ISS", requires = "jwks")]
    jwt_issuer: Option<String>,
    /// An `aud` a token may name (with --jwks; repeat for several).
    #[arg(long, value_name = "AUD", requires = "jwks")]
    jwt_audience: Vec<String>,
    /// The claim read as `principal.tenant`.
    #[arg(long, value_name = "CLAIM", default_value = "tenant")]
    jwt_tenant_claim: String,
}

impl JwtArgs {
    /// The verifier's configuration, when `--jwks` is given.
    pub fn config(&self) -> Option<JwtConfig> {
        match (&self.jwks, &self.jwt_issuer, self.jwt_audience.first()) {
            (Some(jwks), Some(issuer), Some(first)) => {
                let mut jwt = JwtConfig::new(jwks, issuer, first);
                jwt.audience.clone_from(&self.jwt_audience);
                jwt.tenant_claim.clone_from(&self.jwt_tenant_claim);
                Some(jwt)
            }
            _ => None,
        }
    }
}
