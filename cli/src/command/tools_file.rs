//! Reading an executor's tool list (`tools.json`) and finding where each tool is written in it.
//!
//! The list may be a model API's (`[{name, description, input_schema}]`, or a request body
//! with `tools`) or an MCP server's `tools/list` result (`{"tools": [{name, inputSchema,
//! annotations}]}`, or the whole JSON-RPC response around it). MCP tool annotations are read
//! as [`Hints`]: untrusted claims a server makes about its tools, compared with the policy's
//! classes by `check --tools`, never used to classify.

use super::{display_name, read_input};
use serde_json::Value;
use toolgate_engine::{RequestError, ToolDef};
use toolgate_lang::{SourceFile, Span};
use toolgate_mcp::json_type as type_name;

/// An executor's tool list with the text it was read from, for located diagnostics.
pub struct ToolsFile {
    /// The file's text, named as given on the command line.
    pub source: SourceFile,
    /// The definitions, in the file's order.
    pub tools: Vec<ToolDef>,
    /// Each definition's MCP annotation hints, in the same order.
    pub hints: Vec<Hints>,
    /// True when an MCP result says more pages follow (`nextCursor`): tools on later pages
    /// are not in the file.
    pub more_pages: bool,
}

/// The MCP annotation hints of one tool, as the server states them (`None`: not stated).
///
/// The spec's defaults for absent hints (`readOnlyHint` false, `destructiveHint` true,
/// `openWorldHint` true) are not filled in: they would flag every tool without annotations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may perform destructive updates.
    pub destructive: Option<bool>,
    /// `openWorldHint`: the tool interacts with an open world of external entities.
    pub open_world: Option<bool>,
}

impl Hints {
    /// Reads a definition's `annotations` (`at` is the definition's path); a hint that is not
    /// a boolean makes the list malformed, and the error names its path.
    fn read(def: &ToolDef, at: &str) -> Result<Hints, String> {
        let Some(annotations) = def.extra.get("annotations") else {
            return Ok(Hints::default());
        };
        let Value::Object(map) = annotations else {
            return Err(format!(
                "malformed tool list at `{at}.annotations`: expected an object, found {}",
                type_name(annotations)
            ));
        };
        let hint = |key: &str| match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "malformed tool list at `{at}.annotations.{key}`: expected a boolean, found {}",
                type_name(other)
            )),
        };
        Ok(Hints {
            read_only: hint("readOnlyHint")?,
            destructive: hint("destructiveHint")?,
            open_world: hint("openWorldHint")?,
        })
    }
}

/// The tool array inside the file's JSON, with its path: a bare array, `tools`, or an MCP
/// JSON-RPC response's `result.tools`. Also whether an MCP result announces more pages.
fn tool_array(value: Value) -> Result<(Value, &'static str, bool), RequestError> {
    let schema = |path: &str, message: &str| RequestError::Schema {
        path: path.into(),
        message: message.into(),
    };
    let Value::Object(mut top) = value else {
        return Ok((value, "", false));
    };
    if top.contains_key("jsonrpc") || top.contains_key("result") || top.contains_key("error") {
        if top.contains_key("error") {
            return Err(schema(
                "error",
                "this is a JSON-RPC error response, not a `tools/list` result",
            ));
        }
        let Some(Value::Object(mut result)) = top.remove("result") else {
            return Err(schema(
                "result",
                "a JSON-RPC response needs a `result` object holding `tools`",
            ));
        };
        let more = result.get("nextCursor").is_some_and(|c| !c.is_null());
        return match result.remove("tools") {
            Some(list) => Ok((list, "result.tools", more)),
            None => Err(schema(
                "result.tools",
                "missing field; a `tools/list` result has a `tools` array",
            )),
        };
    }
    let more = top.get("nextCursor").is_some_and(|c| !c.is_null());
    match top.remove("tools") {
        Some(list) => Ok((list, "tools", more)),
        None => Err(schema(
            "tools",
            "missing field; give an array of tool definitions, or an object with `tools`",
        )),
    }
}

impl ToolsFile {
    /// Reads `path` (or standard input for `-`): an array of tool definitions, an object
    /// with a `tools` array such as a model API request body or an MCP `tools/list` result,
    /// or a JSON-RPC response whose `result` is one.
    pub fn read(path: &str) -> Result<ToolsFile, String> {
        let text = read_input(path).map_err(|e| format!("error: {e}"))?;
        let name = display_name(path);
        let listed = toolgate_engine::parse_json(&text)
            .and_then(tool_array)
            .and_then(|(list, at, more)| Ok((ToolDef::list_from_value(list, at)?, at, more)));
        let (tools, at, more_pages) = listed.map_err(|e| match e {
            RequestError::Json {
                line,
                column,
                message,
            } => {
                format!("error: {name}:{line}:{column}: the tool list is not valid JSON: {message}")
            }
            RequestError::Schema { path, message } => {
                let at = if path.is_empty() {
                    "the top level"
                } else {
                    &path
                };
                format!("error: {name}: malformed tool list at `{at}`: {message}")
            }
            other => format!("error: {name}: {other}"),
        })?;
        let hints = tools
            .iter()
            .enumerate()
            .map(|(i, def)| Hints::read(def, &format!("{at}[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("error: {name}: {e}"))?;
        Ok(ToolsFile {
            source: SourceFile::new(name, text),
            tools,
            hints,
            more_pages,
        })
    }

    /// Where the `index`-th definition's name is written: the string after its `"name":`.
    ///
    /// Found by a scan of the text, since the JSON reader keeps no positions; `None` when
    /// the scan cannot find it (the caller then names the tool without a caret).
    pub fn name_span(&self, index: usize) -> Option<Span> {
        let tool = self.tools.get(index)?;
        let literal = serde_json::to_string(&tool.name).ok()?;
        // The k-th definition of a name is the k-th `"name": "<it>"` in the text.
        let nth = self.tools[..index]
            .iter()
            .filter(|t| t.name == tool.name)
            .count();
        let text = self.source.text();
        let mut found = 0;
        for (at, _) in text.match_indices("\"name\"") {
            let rest = &text[at + "\"name\"".len()..];
            let after_ws = rest.trim_start();
            let Some(value) = after_ws.strip_prefix(':').map(str::trim_start) else {
                continue;
            };
            if !value.starts_with(literal.as_str()) {
                continue;
            }
            if found == nth {
                let start = text.len() - value.len();
                return Some(Span::new(start, start + literal.len()));
            }
            found += 1;
        }
        None
    }
}
