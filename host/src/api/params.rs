//! A route's query parameters, each named once: `?queue=a&queue=b` is refused, not read as
//! `queue=b` (a client building its query with a repeated name for a list, as
//! `URLSearchParams.append` or `requests` do, would have had all but the last value dropped
//! without a word; a list is one parameter, `queue=a,b`).

use std::collections::BTreeMap;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The query's parameters by name.
pub(super) struct Params(pub BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let mut params = BTreeMap::new();
        for (name, value) in pairs {
            if params.contains_key(&name) {
                let message = format!("{name}: given more than once; a list is one parameter, {name}=a,b");
                return Err(ApiError::bad("invalid", message).into_response());
            }
            params.insert(name, value);
        }
        Ok(Params(params))
    }
}
