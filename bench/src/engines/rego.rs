//! regorus: the interpreter (`eval_rule` on a reused engine) and the RVM bytecode VM.

use crate::verdict::Verdict;
use crate::BenchError;
use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::vm::RegoVM;
use regorus::{Engine, Rc, Value};
use std::sync::Arc;

/// The workload's Rego policy.
pub const WORKLOAD_REGO: &str = include_str!("../../policies/workload.rego");
/// The tables the policy reads from `data`.
pub const WORKLOAD_DATA: &str = include_str!("../../policies/workload.data.json");
/// The rule evaluated once per batch.
pub const ENTRY_POINT: &str = "data.gate.decisions";

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Engine {
        engine: "regorus",
        message: format!("{e:#}"),
    }
}

/// An interpreter engine with the policy and data loaded, reused across evaluations.
pub fn interpreter() -> Result<Engine, BenchError> {
    let mut engine = Engine::new();
    engine
        .add_policy("workload.rego".into(), WORKLOAD_REGO.into())
        .map_err(err)?;
    engine.add_data_json(WORKLOAD_DATA).map_err(err)?;
    Ok(engine)
}

/// Loads and compiles the policy to an RVM program (the "load + compile" benchmark).
pub fn compile_program() -> Result<Arc<regorus::rvm::program::Program>, BenchError> {
    let mut engine = interpreter()?;
    let entry: Rc<str> = Rc::from(ENTRY_POINT);
    let compiled = engine.compile_with_entrypoint(&entry).map_err(err)?;
    Compiler::compile_from_policy(&compiled, &[ENTRY_POINT]).map_err(err)
}

/// A VM with the program and the data loaded; call [`run_vm`] per batch.
pub fn vm() -> Result<RegoVM, BenchError> {
    let program = compile_program()?;
    let mut vm = RegoVM::new();
    vm.load_program(program);
    vm.set_data(Value::from_json_str(WORKLOAD_DATA).map_err(err)?)
        .map_err(err)?;
    Ok(vm)
}

/// Evaluates one batch on the interpreter.
pub fn run_interpreter(engine: &mut Engine, input: Value) -> Result<Value, BenchError> {
    engine.set_input(input);
    engine.eval_rule(ENTRY_POINT.into()).map_err(err)
}

/// Evaluates one batch on the VM.
pub fn run_vm(vm: &mut RegoVM, input: Value) -> Result<Value, BenchError> {
    vm.set_input(input);
    vm.execute().map_err(err)
}

/// Parses a document into a regorus input value.
pub fn input(json: &str) -> Result<Value, BenchError> {
    Value::from_json_str(json).map_err(err)
}

/// Maps `["allow" | rule id, ...]` to verdicts.
pub fn verdicts(value: &Value) -> Result<Vec<Verdict>, BenchError> {
    let items = value
        .as_array()
        .map_err(|e| err(format!("decisions is not an array ({e}): {value}")))?;
    items
        .iter()
        .map(|v| {
            v.as_string()
                .ok()
                .and_then(|s| Verdict::from_name(s))
                .ok_or_else(|| err(format!("unexpected decision {v}")))
        })
        .collect()
}
