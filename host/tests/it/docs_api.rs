//! docs/serve.md's table of endpoints cannot drift from the API: every endpoint it lists is in
//! the OpenAPI document (generated from the handlers) and every endpoint of the document is
//! listed, and the fields it quotes of an answer (`{"id", "attempt"}`) are that answer's.

use crate::common;

use std::collections::BTreeSet;

use serde_json::Value;

/// The code spans of a line, in order.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Each row of the endpoint table: its (method, path) pairs and the text of its "does" cell.
fn documented() -> Vec<(Vec<(String, String)>, String)> {
    let text = std::fs::read_to_string(common::repo_root().join("docs/serve.md")).expect("docs/serve.md");
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let spans = code_spans(cells[0]);
        let Some((method, path)) = spans.first().and_then(|s| s.split_once(' ')) else { continue };
        if !path.starts_with("/api/") {
            continue;
        }
        let mut endpoints = vec![(method.to_lowercase(), path.to_string())];
        // `/resume` after `.../pause`: the same path with its last part replaced.
        for other in &spans[1..] {
            let base = path.rsplit_once('/').map_or(path, |(b, _)| b);
            endpoints.push((method.to_lowercase(), format!("{base}{other}")));
        }
        rows.push((endpoints, cells.get(1).copied().unwrap_or_default().to_string()));
    }
    rows
}

/// The property names of a schema, following `$ref`s into the document's components.
fn properties(doc: &Value, schema: &Value) -> BTreeSet<String> {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or_default();
        return properties(doc, &doc["components"]["schemas"][name]);
    }
    let mut names: BTreeSet<String> =
        schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
    for key in ["oneOf", "anyOf", "allOf"] {
        for s in schema[key].as_array().into_iter().flatten() {
            names.extend(properties(doc, s));
        }
    }
    names
}

#[test]
fn the_endpoint_table_lists_exactly_the_documents_endpoints_and_their_answers_fields() {
    let doc = serde_json::to_value(taskhost::api::openapi()).expect("the document as JSON");
    let methods = ["get", "post", "put", "patch", "delete"];
    let in_document: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, ops)| {
            methods.iter().filter(|m| ops.get(**m).is_some()).map(|m| (m.to_string(), path.clone()))
        })
        .collect();
    let rows = documented();
    let in_table: BTreeSet<(String, String)> = rows.iter().flat_map(|(e, _)| e.iter().cloned()).collect();
    let open_api_itself = ("get".to_string(), "/api/openapi.json".to_string());
    let missing: Vec<_> = in_document.difference(&in_table).collect();
    let unknown: Vec<_> = in_table.iter().filter(|e| !in_document.contains(*e) && **e != open_api_itself).collect();
    assert!(missing.is_empty(), "endpoints the table leaves out: {missing:?}");
    assert!(unknown.is_empty(), "endpoints the table lists that the API does not have: {unknown:?}");
    for (endpoints, does) in &rows {
        // `{"a", "b"}`: the fields of the answer, each one the answer's schema has.
        let quoted: Vec<&str> = does
            .split("`{\"")
            .skip(1)
            .filter_map(|s| s.split_once("}`").map(|(fields, _)| fields))
            .filter(|f| !f.contains(':'))
            .collect();
        // Of one of the row's endpoints (`/trigger` answers `{"name", "task"}`, `/pause` does not).
        let mut fields = BTreeSet::new();
        for (method, path) in endpoints {
            let Some(op) = doc["paths"][path].get(method) else { continue };
            let answers = op["responses"].as_object().expect("responses");
            for (status, answer) in answers.iter().filter(|(s, _)| s.starts_with('2')) {
                // JSON, or the events of a stream (`/events`).
                let content = &answer["content"];
                let schema = match content.get("application/json") {
                    Some(json) => &json["schema"],
                    None => &content["text/event-stream"]["schema"],
                };
                assert!(!schema.is_null(), "{method} {path} {status}: no JSON schema");
                fields.extend(properties(&doc, schema));
            }
        }
        for list in &quoted {
            for field in list.split(", ").map(|f| f.trim_matches('"')) {
                assert!(fields.contains(field), "{endpoints:?}: the docs quote {field:?}, the answers have {fields:?}");
            }
        }
    }
}
