//! From a checked expression to the program that runs: cel-go's AST
//! validators (homogeneous literals, regular expression literals), the
//! checks cel-go makes when it plans the program (constant type conversions
//! are evaluated, constant regular expressions compiled, and either failing
//! refuses the selector), and the rewrites that give calls Go's runtime
//! semantics (see [`library`](super::library)).

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SelectExpr};
use cel::common::types::CelString;
use cel::{Context, Value};

use super::Release;
use super::check::Checked;
use super::library::{ENV, compile_regex, rewritten};
use super::types::Ty;

/// cel-go's AST validators: list and map literals of one type (except
/// within `format` calls, which the strings extension exempts), and a
/// literal first argument of `matches` that compiles.
pub(crate) fn validate(expr: &IdedExpr, checked: &Checked) -> Vec<String> {
    let mut errors = Vec::new();
    let mut exempt = Vec::new();
    walk(expr, &mut |e| {
        if let Expr::Call(call) = &e.expr
            && call.func_name == "format"
        {
            walk(e, &mut |inner| exempt.push(inner.id));
        }
    });
    walk(expr, &mut |e| match &e.expr {
        Expr::List(_) | Expr::Map(_) if exempt.contains(&e.id) => {}
        Expr::List(list) => {
            let mut first: Option<Ty> = None;
            for (i, elem) in list.elements.iter().enumerate() {
                let mut t = checked.type_of(elem.id);
                if list.optional_indices.contains(&i)
                    && let Some(inner) = t.unwrap_optional()
                {
                    t = inner.clone();
                }
                match &first {
                    None => first = Some(t),
                    Some(f) if !f.is_equivalent(&t) => {
                        errors.push(format!("expected type '{f}' but found '{t}'"));
                        break;
                    }
                    Some(_) => {}
                }
            }
        }
        Expr::Map(map) => {
            let mut first: Option<(Ty, Ty)> = None;
            for entry in &map.entries {
                let EntryExpr::MapEntry(entry) = &entry.expr else {
                    continue;
                };
                let k = checked.type_of(entry.key.id);
                let mut v = checked.type_of(entry.value.id);
                if entry.optional
                    && let Some(inner) = v.unwrap_optional()
                {
                    v = inner.clone();
                }
                match &first {
                    None => first = Some((k, v)),
                    Some((fk, fv)) => {
                        if !fk.is_equivalent(&k) {
                            errors.push(format!("expected type '{fk}' but found '{k}'"));
                        }
                        if !fv.is_equivalent(&v) {
                            errors.push(format!("expected type '{fv}' but found '{v}'"));
                        }
                    }
                }
            }
        }
        Expr::Call(call) if call.func_name == "matches" => {
            if let Some(IdedExpr {
                expr: Expr::Literal(LiteralValue::String(pattern)),
                ..
            }) = call.args.first()
                && compile_regex(pattern.inner()).is_err()
            {
                errors.push("invalid matches argument".to_owned());
            }
        }
        _ => {}
    });
    errors
}

fn walk(e: &IdedExpr, f: &mut impl FnMut(&IdedExpr)) {
    f(e);
    match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                walk(t, f);
            }
            call.args.iter().for_each(|a| walk(a, f));
        }
        Expr::Select(s) => walk(&s.operand, f),
        Expr::List(l) => l.elements.iter().for_each(|a| walk(a, f)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, f);
                    walk(&entry.value, f);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    walk(&field.value, f);
                }
            }
        }
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(part, f);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The expression with calls renamed to the functions that evaluate them as
/// Go does.
pub(crate) fn rewrite(e: &IdedExpr, checked: &Checked, release: Release) -> IdedExpr {
    let expr = match &e.expr {
        Expr::Call(call) => {
            let mut call = CallExpr {
                func_name: call.func_name.clone(),
                target: call.target.as_ref().map(|t| Box::new(rewrite(t, checked, release))),
                args: call.args.iter().map(|a| rewrite(a, checked, release)).collect(),
            };
            call.func_name = runtime_name(e.id, &call, checked, release);
            // `lists.range(n)` is a call on the name `lists`
            if call.func_name == "range"
                && release < Release::V1_37
                && matches!(call.target.as_deref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "lists")
                && checked.calls.get(&e.id).is_some_and(|o| o == &["lists_range"])
            {
                call.func_name = rewritten::RANGE_V026.to_owned();
                call.target = None;
            }
            Expr::Call(call)
        }
        Expr::Select(s) => {
            let operand = rewrite(&s.operand, checked, release);
            if s.test && checked.type_of(s.operand.id).is_dyn() {
                // has(x.f) on a value of no static type
                Expr::Call(CallExpr {
                    func_name: rewritten::HAS.to_owned(),
                    target: None,
                    args: vec![
                        operand,
                        IdedExpr {
                            id: 0,
                            expr: Expr::Literal(LiteralValue::String(CelString::from(s.field.clone()))),
                        },
                    ],
                })
            } else {
                Expr::Select(SelectExpr {
                    operand: Box::new(operand),
                    field: s.field.clone(),
                    test: s.test,
                })
            }
        }
        Expr::List(l) => {
            let mut l = l.clone();
            l.elements = l.elements.iter().map(|x| rewrite(x, checked, release)).collect();
            Expr::List(l)
        }
        Expr::Map(m) => {
            let mut m = m.clone();
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    entry.key = rewrite(&entry.key, checked, release);
                    entry.value = rewrite(&entry.value, checked, release);
                }
            }
            Expr::Map(m)
        }
        Expr::Comprehension(c) => {
            let mut c = c.clone();
            c.iter_range = rewrite(&c.iter_range, checked, release);
            c.accu_init = rewrite(&c.accu_init, checked, release);
            c.loop_cond = rewrite(&c.loop_cond, checked, release);
            c.loop_step = rewrite(&c.loop_step, checked, release);
            c.result = rewrite(&c.result, checked, release);
            if is_bind(&c)
                && let Some(inlined) = inline_bind(&c)
            {
                return inlined;
            }
            charge_iterations(&mut c);
            Expr::Comprehension(c)
        }
        other => other.clone(),
    };
    IdedExpr { id: e.id, expr }
}

/// Charges each iteration of a macro's loop (see `library::charge`): the
/// expression evaluated per element is wrapped in `tick(weight, ..)`, in a
/// place that keeps the loop's shape (the `cel` crate recognises the steps
/// of `all`/`exists`, which fold errors as cel-go does, and of
/// `map`/`filter`, which it appends in place; their `+` stays the crate's).
fn charge_iterations(c: &mut ComprehensionExpr) {
    let accu = c.accu_var.clone();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == accu);
    let tick = |e: &mut IdedExpr, overhead: i64| {
        let weight = overhead + non_literal_nodes(e);
        let inner = std::mem::take(e);
        *e = IdedExpr {
            id: 0,
            expr: Expr::Call(CallExpr {
                func_name: rewritten::TICK.to_owned(),
                target: None,
                args: vec![
                    IdedExpr {
                        id: 0,
                        expr: Expr::Literal(LiteralValue::Int(weight.into())),
                    },
                    inner,
                ],
            }),
        };
    };
    // `accu + [x]` as the crate appends it
    let append = |e: &mut IdedExpr| -> Option<()> {
        let Expr::Call(call) = &mut e.expr else { return None };
        if call.func_name != rewritten::ADD || call.args.len() != 2 || !is_accu(&call.args[0]) {
            return None;
        }
        let Expr::List(list) = &mut call.args[1].expr else {
            return None;
        };
        call.func_name = "_+_".to_owned();
        for elem in &mut list.elements {
            tick(elem, 10);
        }
        Some(())
    };
    let Expr::Call(step) = &mut c.loop_step.expr else {
        return;
    };
    match (step.func_name.as_str(), step.args.as_mut_slice()) {
        // all, exists
        ("_&&_" | "_||_", [first, predicate]) if is_accu(first) => tick(predicate, 4),
        // filter, map with a filter, exists_one
        ("_?_:_", [cond, then, otherwise]) if is_accu(otherwise) => {
            tick(cond, 4);
            let _ = append(then);
        }
        // map
        _ => {
            let _ = append(&mut c.loop_step);
        }
    }
}

fn non_literal_nodes(e: &IdedExpr) -> i64 {
    let mut n = 0;
    walk(e, &mut |x| {
        if !matches!(x.expr, Expr::Literal(_)) {
            n += 1;
        }
    });
    n
}

/// cel-go plans `x in []` as the constant false, `x` unevaluated (after
/// its constants were checked: run after [`plan`]).
pub(crate) fn fold_empty_in(e: &IdedExpr, checked: &Checked) -> IdedExpr {
    let mut out = e.clone();
    fold_in_place(&mut out, checked);
    out
}

fn fold_in_place(e: &mut IdedExpr, checked: &Checked) {
    if let Expr::Call(call) = &e.expr
        && call.func_name == rewritten::IN
        && checked.calls.get(&e.id).is_some_and(|o| o == &["in_list"])
        && matches!(&call.args.get(1).map(|a| &a.expr), Some(Expr::List(l)) if l.elements.is_empty())
    {
        e.expr = Expr::Literal(LiteralValue::Boolean(false.into()));
        return;
    }
    match &mut e.expr {
        Expr::Call(call) => {
            if let Some(t) = &mut call.target {
                fold_in_place(t, checked);
            }
            call.args.iter_mut().for_each(|a| fold_in_place(a, checked));
        }
        Expr::Select(s) => fold_in_place(&mut s.operand, checked),
        Expr::List(l) => l.elements.iter_mut().for_each(|a| fold_in_place(a, checked)),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    fold_in_place(&mut entry.key, checked);
                    fold_in_place(&mut entry.value, checked);
                }
            }
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                fold_in_place(part, checked);
            }
        }
        _ => {}
    }
}

/// `cel.bind(name, init, body)` as the macro expands it.
fn is_bind(c: &ComprehensionExpr) -> bool {
    c.iter_var == "#unused"
        && matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
        && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        && matches!(&c.loop_step.expr, Expr::Ident(n) if *n == c.accu_var)
}

/// The most nodes an inlined `cel.bind` body may grow to; beyond, the bound
/// expression is evaluated first, as the `cel` crate does.
const MAX_INLINED: usize = 4096;

/// cel-go evaluates a comprehension's accumulator when the body first reads
/// it: the bound expression of `cel.bind` is not evaluated (and its errors
/// do not count) where the body does not reach the name, as in
/// `cel.bind(x, attrs.missing, has(attrs.missing) && x == 1)`. CEL has no
/// side effects, so the body with the expression written in for the name
/// gives the same answers; the `cel` crate, which evaluates the accumulator
/// first, is handed that.
fn inline_bind(c: &ComprehensionExpr) -> Option<IdedExpr> {
    let free = identifiers(&c.accu_init);
    let mut fresh = 0;
    let inlined = substitute(&c.result, &c.accu_var, &c.accu_init, &free, &mut fresh);
    (size(&inlined) <= MAX_INLINED).then_some(inlined)
}

fn size(e: &IdedExpr) -> usize {
    let mut n = 0;
    walk(e, &mut |_| n += 1);
    n
}

/// The identifiers `e` mentions (a superset of its free variables).
fn identifiers(e: &IdedExpr) -> Vec<String> {
    let mut names = Vec::new();
    walk(e, &mut |x| {
        if let Expr::Ident(name) = &x.expr {
            names.push(name.clone());
        }
    });
    names
}

/// An identifier no expression can spell.
fn fresh_ident(fresh: &mut usize) -> IdedExpr {
    *fresh += 1;
    IdedExpr {
        id: 0,
        expr: Expr::Ident(format!("@bound{fresh}")),
    }
}

fn ident_name(e: &IdedExpr) -> String {
    match &e.expr {
        Expr::Ident(name) => name.clone(),
        _ => String::new(),
    }
}

/// `e` with the free occurrences of `name` replaced by `by`, renaming a
/// comprehension variable that would capture one of `by`'s names.
fn substitute(e: &IdedExpr, name: &str, by: &IdedExpr, free: &[String], fresh: &mut usize) -> IdedExpr {
    let expr = match &e.expr {
        Expr::Ident(n) if n == name => return by.clone(),
        Expr::Comprehension(c) => {
            let mut c = c.clone();
            c.iter_range = substitute(&c.iter_range, name, by, free, fresh);
            c.accu_init = substitute(&c.accu_init, name, by, free, fresh);
            // variables that would capture a name of `by` get fresh names
            if c.iter_var != name && free.contains(&c.iter_var) {
                let to = fresh_ident(fresh);
                c.loop_cond = substitute(&c.loop_cond, &c.iter_var, &to, &[], fresh);
                c.loop_step = substitute(&c.loop_step, &c.iter_var, &to, &[], fresh);
                c.iter_var = ident_name(&to);
            }
            if c.accu_var != name && free.contains(&c.accu_var) {
                let to = fresh_ident(fresh);
                c.loop_cond = substitute(&c.loop_cond, &c.accu_var, &to, &[], fresh);
                c.loop_step = substitute(&c.loop_step, &c.accu_var, &to, &[], fresh);
                c.result = substitute(&c.result, &c.accu_var, &to, &[], fresh);
                c.accu_var = ident_name(&to);
            }
            // `name` shadowed: the iteration variable in the loop, the
            // accumulator in the loop and the result
            if c.iter_var != name && c.accu_var != name {
                c.loop_cond = substitute(&c.loop_cond, name, by, free, fresh);
                c.loop_step = substitute(&c.loop_step, name, by, free, fresh);
            }
            if c.accu_var != name {
                c.result = substitute(&c.result, name, by, free, fresh);
            }
            Expr::Comprehension(c)
        }
        Expr::Call(call) => Expr::Call(CallExpr {
            func_name: call.func_name.clone(),
            target: call
                .target
                .as_ref()
                .map(|t| Box::new(substitute(t, name, by, free, fresh))),
            args: call.args.iter().map(|a| substitute(a, name, by, free, fresh)).collect(),
        }),
        Expr::Select(s) => Expr::Select(SelectExpr {
            operand: Box::new(substitute(&s.operand, name, by, free, fresh)),
            field: s.field.clone(),
            test: s.test,
        }),
        Expr::List(l) => {
            let mut l = l.clone();
            l.elements = l
                .elements
                .iter()
                .map(|x| substitute(x, name, by, free, fresh))
                .collect();
            Expr::List(l)
        }
        Expr::Map(m) => {
            let mut m = m.clone();
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    entry.key = substitute(&entry.key, name, by, free, fresh);
                    entry.value = substitute(&entry.value, name, by, free, fresh);
                }
            }
            Expr::Map(m)
        }
        other => other.clone(),
    };
    IdedExpr { id: e.id, expr }
}

fn runtime_name(id: u64, call: &CallExpr, checked: &Checked, release: Release) -> String {
    let v029 = release >= Release::V1_37;
    // of no static type, or an optional of one
    let untyped = |i: usize| {
        call.args.get(i).is_some_and(|a| {
            let t = checked.type_of(a.id);
            t.unwrap_optional().unwrap_or(&t).is_dyn()
        })
    };
    let overloads = checked.calls.get(&id).map(Vec::as_slice).unwrap_or(&[]);
    let only = |ids: &[&str]| !overloads.is_empty() && overloads.iter().all(|o| ids.contains(o));
    let name = match (call.func_name.as_str(), call.target.is_some()) {
        ("@in", false) if only(&["in_list"]) && primitive_constants(call.args.get(1)) => rewritten::IN_SET,
        ("@in", false) => rewritten::IN,
        ("_?._", false) if untyped(0) => rewritten::OPT_SELECT,
        ("_[?_]", false) if untyped(0) => rewritten::OPT_INDEX,
        ("_+_", false) => rewritten::ADD,
        ("replace", true) => rewritten::REPLACE,
        ("_==_", false) => rewritten::EQUALS,
        ("_!=_", false) => rewritten::NOT_EQUALS,
        ("int", false) => rewritten::INT,
        ("uint", false) => rewritten::UINT,
        ("double", false) => rewritten::DOUBLE,
        ("string", false) => rewritten::STRING,
        ("bool", false) => rewritten::BOOL,
        ("sum", true) if only(&["list_double_sum_double"]) => rewritten::SUM_DOUBLE,
        ("sum", true) if only(&["list_uint_sum_uint"]) => rewritten::SUM_UINT,
        ("sum", true) => rewritten::SUM_INT,
        ("includes", true) if only(&["dra_includes_dyn_dyn"]) => rewritten::INCLUDES_LIMITED,
        ("indexOf", true) if only(&["string_index_of_string_int"]) => {
            if v029 {
                rewritten::INDEX_OF_V029
            } else {
                rewritten::INDEX_OF_V026
            }
        }
        ("lastIndexOf", true) if only(&["string_last_index_of_string_int"]) => {
            if v029 {
                rewritten::LAST_INDEX_OF_V029
            } else {
                rewritten::LAST_INDEX_OF_V026
            }
        }
        (name, _) => name,
    };
    name.to_owned()
}

/// A list literal of constants of the types cel-go hashes (bool, int,
/// uint, double, string), which it plans `in` on as a Go map lookup.
fn primitive_constants(list: Option<&IdedExpr>) -> bool {
    let Some(list) = list else {
        return false;
    };
    let Expr::List(l) = &list.expr else {
        return false;
    };
    if l.elements.is_empty() || !is_constant(list) {
        return false;
    }
    let context = Context::with_env(ENV.clone());
    l.elements.iter().all(|e| {
        Value::resolve_val(e, &context)
            .is_ok_and(|v| matches!(v.get_type().name(), "bool" | "int" | "uint" | "double" | "string"))
    })
}

/// Type conversions cel-go evaluates when it plans the program if their
/// argument is a constant.
fn is_conversion(call: &CallExpr) -> bool {
    call.target.is_none()
        && call.args.len() == 1
        && matches!(
            call.func_name.as_str(),
            rewritten::INT
                | rewritten::UINT
                | rewritten::DOUBLE
                | rewritten::STRING
                | rewritten::BOOL
                | "bytes"
                | "dyn"
                | "type"
        )
}

/// Whether cel-go's planner holds `e` as a constant: a literal, a list or map
/// literal of constants, a conversion of a constant.
fn is_constant(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Literal(_) => true,
        Expr::List(l) => l.optional_indices.is_empty() && l.elements.iter().all(is_constant),
        Expr::Map(m) => m.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => !entry.optional && is_constant(&entry.key) && is_constant(&entry.value),
            EntryExpr::StructField(_) => false,
        }),
        Expr::Call(call) => is_conversion(call) && is_constant(&call.args[0]),
        _ => false,
    }
}

/// The failures cel-go reports when it plans the program
/// ("program instantiation failed"): a constant conversion that fails, a
/// constant regular expression that does not compile.
pub(crate) fn plan(program: &IdedExpr) -> Vec<String> {
    let mut errors = Vec::new();
    let context = Context::with_env(ENV.clone());
    walk(program, &mut |e| {
        let Expr::Call(call) = &e.expr else {
            return;
        };
        if is_conversion(call) && is_constant(&call.args[0]) {
            if let Err(err) = Value::resolve_val(e, &context) {
                errors.push(super::runtime_message(&err));
            }
            return;
        }
        let pattern = match (call.func_name.as_str(), call.target.is_some()) {
            ("matches" | "find" | "findAll", true) => call.args.first(),
            ("matches", false) => call.args.get(1),
            _ => None,
        };
        if let Some(pattern) = pattern.filter(|p| is_constant(p))
            && let Ok(value) = Value::resolve_val(pattern, &context)
            && let Some(text) = value.downcast_ref::<CelString>()
            && let Err(err) = compile_regex(text.inner())
        {
            errors.push(err);
        }
    });
    errors
}
