//! Reading an executor's tool list (`tools.json`) and finding where each tool is written in it.

use super::{display_name, read_input};
use toolgate_engine::{RequestError, ToolDef};
use toolgate_lang::{SourceFile, Span};

/// An executor's tool list with the text it was read from, for located diagnostics.
pub struct ToolsFile {
    /// The file's text, named as given on the command line.
    pub source: SourceFile,
    /// The definitions, in the file's order.
    pub tools: Vec<ToolDef>,
}

impl ToolsFile {
    /// Reads `path` (or standard input for `-`): an array of tool definitions, or an object
    /// with a `tools` array such as a model API request body.
    pub fn read(path: &str) -> Result<ToolsFile, String> {
        let text = read_input(path).map_err(|e| format!("error: {e}"))?;
        let name = display_name(path);
        let tools = ToolDef::list_from_json(&text).map_err(|e| match e {
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
        Ok(ToolsFile {
            source: SourceFile::new(name, text),
            tools,
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
