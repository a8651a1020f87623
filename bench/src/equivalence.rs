//! Runs every engine on every case and refuses to go on if any two answers differ.

use crate::documents::Document;
use crate::engines::{cedar::CedarGate, floor, rego, toolgate};
use crate::verdict::Verdict;
use crate::BenchError;
use toolgate_engine::{Policy, Request};

/// Every engine, loaded once.
pub struct Engines {
    toolgate: Policy,
    rego_interpreter: regorus::Engine,
    rego_vm: regorus::rvm::vm::RegoVM,
    cedar: CedarGate,
}

/// What the check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Cases checked.
    pub cases: usize,
    /// Calls judged per engine.
    pub calls: usize,
    /// Allowed calls.
    pub allowed: usize,
    /// Denied calls.
    pub denied: usize,
}

impl Engines {
    /// Loads the workload into every engine.
    pub fn load() -> Result<Engines, BenchError> {
        Ok(Engines {
            toolgate: toolgate::compile_workload()?,
            rego_interpreter: rego::interpreter()?,
            rego_vm: rego::vm()?,
            cedar: CedarGate::new()?,
        })
    }

    /// Every engine's verdicts for one document, labelled.
    pub fn answers(
        &mut self,
        doc: &Document,
    ) -> Result<Vec<(&'static str, Vec<Verdict>)>, BenchError> {
        let request = Request::from_json(&doc.json).map_err(|e| BenchError::Engine {
            engine: "toolgate",
            message: e.to_string(),
        })?;
        let value: serde_json::Value =
            serde_json::from_str(&doc.json).map_err(|e| BenchError::Engine {
                engine: "serde_json",
                message: e.to_string(),
            })?;
        let decide_json = self
            .toolgate
            .decide_json(&doc.json)
            .map_err(|e| BenchError::Engine {
                engine: "toolgate",
                message: e.to_string(),
            })?;
        let input = rego::input(&doc.json)?;
        let requests = self.cedar.build(&value)?;
        Ok(vec![
            (
                "toolgate decide",
                toolgate::verdicts(&self.toolgate.decide(&request))?,
            ),
            ("toolgate decide_json", toolgate::verdicts(&decide_json)?),
            (
                "toolgate decide_into",
                toolgate::verdicts_into(&self.toolgate, &request)?,
            ),
            ("floor", floor::decide(&floor::Facts::from_value(&value))),
            (
                "regorus interpreter",
                rego::verdicts(&rego::run_interpreter(
                    &mut self.rego_interpreter,
                    input.clone(),
                )?)?,
            ),
            (
                "regorus rvm",
                rego::verdicts(&rego::run_vm(&mut self.rego_vm, input)?)?,
            ),
            ("cedar", self.cedar.verdicts(&requests)?),
        ])
    }

    /// Checks one document: all engines agree, and agree with its expected answer if any.
    pub fn check(&mut self, doc: &Document) -> Result<Vec<Verdict>, BenchError> {
        let answers = self.answers(doc).map_err(|e| {
            BenchError::Mismatch(format!("{}: {e}\n  input: {}", doc.name, doc.json))
        })?;
        let (first_name, first) = &answers[0];
        let reference: (&str, &Vec<Verdict>) = match &doc.expected {
            Some(e) => ("expected", e),
            None => (first_name, first),
        };
        for (name, got) in &answers {
            if got != reference.1 {
                let show =
                    |v: &[Verdict]| v.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ");
                return Err(BenchError::Mismatch(format!(
                    "case `{}`: {} says [{}] but {} says [{}]\n  input: {}",
                    doc.name,
                    reference.0,
                    show(reference.1),
                    name,
                    show(got),
                    doc.json
                )));
            }
        }
        Ok(first.clone())
    }
}

/// Checks every case; the error names the first differing case.
pub fn check_all(cases: &[Document]) -> Result<Summary, BenchError> {
    let mut engines = Engines::load()?;
    let mut summary = Summary {
        cases: 0,
        calls: 0,
        allowed: 0,
        denied: 0,
    };
    for doc in cases {
        let verdicts = engines.check(doc)?;
        summary.cases += 1;
        summary.calls += verdicts.len();
        summary.allowed += verdicts.iter().filter(|v| **v == Verdict::Allow).count();
        summary.denied += verdicts.iter().filter(|v| **v != Verdict::Allow).count();
    }
    Ok(summary)
}
