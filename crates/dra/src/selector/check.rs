//! The type check cel-go runs before a selector may be used: every name
//! declared, every call resolved to overloads by the arguments' static types,
//! list and map literals homogeneous, the result a `bool` (or the release's
//! "unknown" attribute type). cel-go's checker (`checker/checker.go`) is the
//! model, in its order; its messages are followed where they are short.
//!
//! The `cel` crate parses and evaluates but does not type-check: without this
//! pass, `device.driver == 1` would evaluate to `false` where the scheduler
//! refuses the selector.

use std::collections::HashMap;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};

use super::decls::{Declarations, Overload};
use super::types::{Mapping, Ty};

/// What the check found.
pub(crate) struct Checked {
    /// Each node's type, before the final substitution.
    types: HashMap<u64, Ty>,
    mapping: Mapping,
    /// The overloads each call node may run.
    pub(crate) calls: HashMap<u64, Vec<&'static str>>,
    /// Type errors (cel-go refuses the selector).
    pub(crate) errors: Vec<String>,
    /// What cel-go accepts but topoalign does not evaluate.
    pub(crate) unsupported: Vec<String>,
}

impl Checked {
    /// The node's type with type parameters resolved (unbound ones `dyn`),
    /// as cel-go records it once checking is done.
    pub(crate) fn type_of(&self, id: u64) -> Ty {
        self.types
            .get(&id)
            .map_or(Ty::Dyn, |t| self.mapping.substitute(t, true))
    }
}

/// The `device` variable's fields, as the release declares them.
pub(crate) struct DeviceFields {
    pub(crate) fields: Vec<(&'static str, Ty)>,
}

/// The struct type of the `device` variable.
pub(crate) const DEVICE_TYPE: &str = "kubernetes.DRADevice";

/// Names cel-go's environment declares as types (`type(x) == int`).
fn type_ident(name: &str) -> Option<Ty> {
    let t = match name {
        "bool" => Ty::Bool,
        "bytes" => Ty::Bytes,
        "double" => Ty::Double,
        "int" => Ty::Int,
        "string" => Ty::String,
        "uint" => Ty::Uint,
        "null_type" => Ty::Null,
        "type" => Ty::Type(Some(Box::new(Ty::Type(None)))),
        "list" => Ty::list(Ty::Param("A".to_owned())),
        "map" => Ty::map(Ty::Param("A".to_owned()), Ty::Param("B".to_owned())),
        "google.protobuf.Duration" => Ty::Duration,
        "google.protobuf.Timestamp" => Ty::Timestamp,
        _ => return None,
    };
    Some(match t {
        Ty::Type(inner) => Ty::Type(inner),
        t => Ty::Type(Some(Box::new(t))),
    })
}

/// Object types the environment knows by name (a struct literal of one
/// compiles in Go, then fails at runtime).
fn known_object_type(name: &str) -> bool {
    name == DEVICE_TYPE || name.starts_with("kubernetes.")
}

/// Two-variable comprehensions and the transform macros (cel-go's
/// `ext.TwoVarComprehensions`), which the parser leaves as calls to this
/// marker: cel-go accepts them, the `cel` crate has no two-variable loop.
pub(crate) const TWO_VARIABLE_MARKER: &str = "@two_variable_comprehension";

pub(crate) fn check(expr: &IdedExpr, decls: &Declarations, device: &DeviceFields) -> Checked {
    let mut c = Checker {
        decls,
        device,
        mapping: Mapping::default(),
        types: HashMap::new(),
        calls: HashMap::new(),
        errors: Vec::new(),
        unsupported: Vec::new(),
        scopes: Vec::new(),
        next_var: 0,
    };
    c.check(expr);
    Checked {
        types: c.types,
        mapping: c.mapping,
        calls: c.calls,
        errors: c.errors,
        unsupported: c.unsupported,
    }
}

struct Checker<'a> {
    decls: &'a Declarations,
    device: &'a DeviceFields,
    mapping: Mapping,
    types: HashMap<u64, Ty>,
    calls: HashMap<u64, Vec<&'static str>>,
    errors: Vec<String>,
    unsupported: Vec<String>,
    /// Comprehension variables, innermost last.
    scopes: Vec<HashMap<String, Ty>>,
    next_var: usize,
}

impl Checker<'_> {
    fn check(&mut self, e: &IdedExpr) -> Ty {
        let t = match &e.expr {
            Expr::Literal(lit) => match lit {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => self.check_ident(name),
            Expr::Select(select) => {
                if !select.test
                    && let Some(name) = e.expr_qualified_name()
                    && let Some(t) = self.resolve_qualified(&name)
                {
                    t
                } else {
                    let t = self.check_select_field(&select.operand, &select.field, false);
                    if select.test { Ty::Bool } else { t }
                }
            }
            Expr::Call(call) => self.check_call(e.id, call),
            Expr::List(list) => self.check_list(list),
            Expr::Map(map) => self.check_map(map),
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                if known_object_type(&s.type_name) {
                    self.unsupported.push(format!("struct literal of {}", s.type_name));
                    Ty::Struct(s.type_name.clone())
                } else {
                    self.error(format!("undeclared reference to '{}'", s.type_name))
                }
            }
            Expr::Comprehension(comp) => self.check_comprehension(comp),
            Expr::Unspecified => self.error("unspecified expression".to_owned()),
        };
        self.types.insert(e.id, t.clone());
        t
    }

    fn error(&mut self, message: String) -> Ty {
        self.errors.push(message);
        Ty::Error
    }

    fn fresh_var(&mut self) -> Ty {
        let v = Ty::Param(format!("_var{}", self.next_var));
        self.next_var += 1;
        v
    }

    fn lookup_var(&self, name: &str) -> Option<Ty> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }

    fn check_ident(&mut self, name: &str) -> Ty {
        if let Some(t) = self.resolve_qualified(name) {
            return t;
        }
        self.error(format!("undeclared reference to '{name}' (in container '')"))
    }

    /// A variable, `device`, or a type name.
    fn resolve_qualified(&mut self, name: &str) -> Option<Ty> {
        if let Some(t) = self.lookup_var(name) {
            return Some(t);
        }
        if name == "device" {
            return Some(Ty::Struct(DEVICE_TYPE.to_owned()));
        }
        let t = type_ident(name)?;
        if name.starts_with("google.protobuf.") {
            self.unsupported.push(format!("the type {name}"));
        }
        Some(t)
    }

    /// cel-go's `checkSelectField`.
    fn check_select_field(&mut self, operand: &IdedExpr, field: &str, optional: bool) -> Ty {
        let operand_type = self.check(operand);
        let operand_type = self.mapping.substitute(&operand_type, false);
        let (target, is_optional) = match operand_type.unwrap_optional() {
            Some(inner) => (inner.clone(), true),
            None => (operand_type, false),
        };
        let result = match &target {
            Ty::Map(_, v) => (**v).clone(),
            Ty::Struct(name) if name == DEVICE_TYPE => match self.device.fields.iter().find(|(f, _)| *f == field) {
                Some((_, t)) => t.clone(),
                None => self.error(format!("undefined field '{field}'")),
            },
            Ty::Struct(name) => {
                let name = name.clone();
                self.error(format!("unexpected failed resolution of '{name}'"))
            }
            Ty::Param(_) => {
                self.mapping.assign(&Ty::Dyn, &target);
                Ty::Dyn
            }
            t if t.is_dyn_or_error() => Ty::Dyn,
            t => {
                let t = t.clone();
                self.error(format!("type '{t}' does not support field selection"));
                Ty::Dyn
            }
        };
        if is_optional || optional {
            Ty::optional(result)
        } else {
            result
        }
    }

    fn check_call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> Ty {
        let name = call.func_name.as_str();
        if name == "_?._" {
            return self.check_opt_select(call);
        }
        if name == TWO_VARIABLE_MARKER {
            // the body's variables are the macro's; not checked here
            if let Some(target) = &call.target {
                self.check(target);
            }
            self.unsupported
                .push("two-variable comprehensions and transform macros".to_owned());
            // the macro's kind rides on the marker's first argument
            return match call.args.first().map(|a| &a.expr) {
                Some(Expr::Literal(LiteralValue::String(kind))) => match kind.inner() {
                    "transformList" => Ty::list(Ty::Dyn),
                    "transformMap" | "transformMapEntry" => Ty::map(Ty::Dyn, Ty::Dyn),
                    _ => Ty::Bool,
                },
                _ => Ty::Dyn,
            };
        }
        let mut arg_types: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
        let Some(target) = &call.target else {
            return match self.decls.function(name) {
                Some(overloads) => self.resolve(id, name, overloads, &arg_types, false),
                None => self.error(format!("undeclared reference to '{name}' (in container '')")),
            };
        };
        if let Some(prefix) = target.expr_qualified_name() {
            let qualified = format!("{prefix}.{name}");
            if let Some(overloads) = self.decls.function(&qualified) {
                return self.resolve(id, &qualified, overloads, &arg_types, false);
            }
        }
        let target_type = self.check(target);
        match self.decls.function(name) {
            Some(overloads) => {
                arg_types.insert(0, target_type);
                self.resolve(id, name, overloads, &arg_types, true)
            }
            None => self.error(format!("undeclared reference to '{name}' (in container '')")),
        }
    }

    fn check_opt_select(&mut self, call: &cel::common::ast::CallExpr) -> Ty {
        let field = match call.args.get(1).map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::String(s))) if call.args.len() == 2 => s.inner().to_owned(),
            _ => return self.error("unsupported optional field selection".to_owned()),
        };
        let t = self.check_select_field(&call.args[0], &field, true);
        self.mapping.substitute(&t, false)
    }

    /// cel-go's `resolveOverload`: every overload the arguments' static types
    /// fit; the result is the one result type, or `dyn` if they differ.
    fn resolve(&mut self, id: u64, name: &str, overloads: &[Overload], arg_types: &[Ty], member: bool) -> Ty {
        if name == "_&&_" || name == "_||_" {
            let mut failed = false;
            for t in arg_types {
                if !self.mapping.assign(t, &Ty::Bool) {
                    self.errors.push(format!("expected type 'bool' but found '{t}'"));
                    failed = true;
                }
            }
            return if failed { Ty::Error } else { Ty::Bool };
        }
        let mut result: Option<Ty> = None;
        let mut matched: Vec<&Overload> = Vec::new();
        for overload in overloads.iter().filter(|o| o.member == member) {
            let (params, overload_result) = if overload.type_params.is_empty() {
                (overload.params.clone(), overload.result.clone())
            } else {
                let mut fresh = Mapping::default();
                for p in &overload.type_params {
                    let var = self.fresh_var();
                    fresh.bind(p, var);
                }
                (
                    overload.params.iter().map(|t| fresh.substitute(t, false)).collect(),
                    fresh.substitute(&overload.result, false),
                )
            };
            if self.mapping.assign_all(arg_types, &params) {
                matched.push(overload);
                let fn_result = self.mapping.substitute(&overload_result, false);
                result = Some(match result {
                    None => fn_result,
                    Some(r) if !r.is_dyn() && !fn_result.is_exact(&r) => Ty::Dyn,
                    Some(r) => r,
                });
            }
        }
        let Some(result) = result else {
            let shown: Vec<String> = arg_types
                .iter()
                .map(|t| self.mapping.substitute(t, true).to_string())
                .collect();
            let applied = if member {
                format!("{}.({})", shown[0], shown[1..].join(", "))
            } else {
                format!("({})", shown.join(", "))
            };
            return self.error(format!(
                "found no matching overload for '{name}' applied to '{applied}'"
            ));
        };
        if matched.iter().all(|o| !o.supported) {
            self.unsupported.push(format!("the function {name}"));
        }
        self.calls.insert(id, matched.iter().map(|o| o.id).collect());
        result
    }

    fn check_list(&mut self, list: &cel::common::ast::ListExpr) -> Ty {
        let mut elems: Option<Ty> = None;
        for (i, e) in list.elements.iter().enumerate() {
            let mut t = self.check(e);
            if list.optional_indices.contains(&i) {
                match t.unwrap_optional() {
                    Some(inner) => t = inner.clone(),
                    None if t.is_dyn() => {}
                    None => {
                        let t = t.clone();
                        self.errors
                            .push(format!("expected type 'optional_type({t})' but found '{t}'"));
                    }
                }
            }
            elems = Some(self.join(elems, t));
        }
        let elem = match elems {
            Some(t) => t,
            None => self.fresh_var(),
        };
        Ty::list(elem)
    }

    fn check_map(&mut self, map: &cel::common::ast::MapExpr) -> Ty {
        let (mut keys, mut values): (Option<Ty>, Option<Ty>) = (None, None);
        for entry in &map.entries {
            let EntryExpr::MapEntry(entry) = &entry.expr else {
                continue;
            };
            let k = self.check(&entry.key);
            keys = Some(self.join(keys, k));
            let mut v = self.check(&entry.value);
            if entry.optional {
                match v.unwrap_optional() {
                    Some(inner) => v = inner.clone(),
                    None if v.is_dyn() => {}
                    None => {
                        let v = v.clone();
                        self.errors
                            .push(format!("expected type 'optional_type({v})' but found '{v}'"));
                    }
                }
            }
            values = Some(self.join(values, v));
        }
        match (keys, values) {
            (Some(k), Some(v)) => Ty::map(k, v),
            _ => {
                let (k, v) = (self.fresh_var(), self.fresh_var());
                Ty::map(k, v)
            }
        }
    }

    /// cel-go's `joinTypes` for aggregate literals: mixed elements make a
    /// `dyn` list (the environment's literals are held to one type by a
    /// validator instead, see `program::validate`).
    fn join(&mut self, previous: Option<Ty>, current: Ty) -> Ty {
        let Some(previous) = previous else {
            return current;
        };
        if self.mapping.assign(&previous, &current) {
            return super::types::most_general(&previous, &current);
        }
        Ty::Dyn
    }

    fn check_comprehension(&mut self, comp: &ComprehensionExpr) -> Ty {
        let range = self.check(&comp.iter_range);
        self.check(&comp.accu_init);
        let range = self.mapping.substitute(&range, false);
        let accu_type = self.types.get(&comp.accu_init.id).cloned().unwrap_or(Ty::Dyn);
        self.scopes
            .push(HashMap::from([(comp.accu_var.clone(), accu_type.clone())]));
        let var_type = match &range {
            Ty::List(e) => (**e).clone(),
            Ty::Map(k, _) => (**k).clone(),
            Ty::Dyn | Ty::Error | Ty::Param(_) => {
                self.mapping.assign(&Ty::Dyn, &range);
                Ty::Dyn
            }
            other => {
                let other = other.clone();
                self.error(format!(
                    "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                ))
            }
        };
        self.scopes.push(HashMap::from([(comp.iter_var.clone(), var_type)]));
        let cond = self.check(&comp.loop_cond);
        self.assert_type(&Ty::Bool, &cond);
        let step = self.check(&comp.loop_step);
        self.assert_type(&accu_type, &step);
        self.scopes.pop();
        let result = self.check(&comp.result);
        self.scopes.pop();
        self.mapping.substitute(&result, false)
    }

    fn assert_type(&mut self, expected: &Ty, actual: &Ty) {
        if !self.mapping.assign(expected, actual) {
            self.errors
                .push(format!("expected type '{expected}' but found '{actual}'"));
        }
    }
}

/// The qualified name an identifier or a chain of field selections spells.
trait QualifiedName {
    fn expr_qualified_name(&self) -> Option<String>;
}

impl QualifiedName for IdedExpr {
    fn expr_qualified_name(&self) -> Option<String> {
        match &self.expr {
            Expr::Ident(name) => Some(name.clone()),
            Expr::Select(s) if !s.test => s
                .operand
                .expr_qualified_name()
                .map(|prefix| format!("{prefix}.{}", s.field)),
            _ => None,
        }
    }
}
