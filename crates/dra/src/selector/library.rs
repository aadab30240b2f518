//! The `cel` crate environment selectors run in: the CEL standard library and
//! the crate's strings and lists extensions, plus what the Kubernetes
//! environment has and the crate lacks or does differently —
//!
//! - macros: `has`, `all`, `exists`, `exists_one`, `map`, `filter` written
//!   here so that exactly cel-go's set is expanded (the crate also expands
//!   `existsOne`, which the Kubernetes environment does not declare), and
//!   `cel.bind`;
//! - k8s.io/apiserver's libraries: quantities, semantic versions, the lists
//!   library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`,
//!   `includes`), regular expressions (`find`, `findAll`);
//! - cel-go's extensions the crate lacks: sets, `first`/`last`,
//!   `optional.unwrap`/`unwrapOpt`;
//! - Go's runtime semantics where the crate's differ, as functions the
//!   selector compiler rewrites calls to (named with a leading `@`, which no
//!   expression can spell): equality (`==` may fail in Go), presence tests on
//!   values that are not maps, and the type conversions.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{
    BOOL_TYPE, CelBool, CelBytes, CelDouble, CelInt, CelList, CelMap, CelNull, CelOptional, CelString, CelUInt,
    DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError};

use super::check::TWO_VARIABLE_MARKER;
use super::quantity::Quantity;
use super::semver::Semver;
use super::values::{DomainMap, QUANTITY_TYPE, QuantityVal, SEMVER_TYPE, SemverVal, unwrap_domain_map};

/// Runtime names of the functions calls are rewritten to.
pub(crate) mod rewritten {
    pub(crate) const EQUALS: &str = "@dra.eq";
    pub(crate) const NOT_EQUALS: &str = "@dra.ne";
    pub(crate) const HAS: &str = "@dra.has";
    /// `tick(weight, value)`: charges a comprehension iteration.
    pub(crate) const TICK: &str = "@dra.tick";
    /// `+`, charging the size of a string, bytes or list it builds.
    pub(crate) const ADD: &str = "@dra.add";
    /// `string.replace`, charging the size of what it builds.
    pub(crate) const REPLACE: &str = "@dra.replace";
    pub(crate) const IN: &str = "@dra.in";
    pub(crate) const IN_SET: &str = "@dra.in_set";
    pub(crate) const OPT_SELECT: &str = "@dra.opt_select";
    pub(crate) const OPT_INDEX: &str = "@dra.opt_index";
    /// `lists.range` up to 1.36 (cel-go v0.26): a negative size is empty.
    pub(crate) const RANGE_V026: &str = "@dra.lists_range_v026";
    pub(crate) const INT: &str = "@dra.int";
    pub(crate) const UINT: &str = "@dra.uint";
    pub(crate) const DOUBLE: &str = "@dra.double";
    pub(crate) const STRING: &str = "@dra.string";
    pub(crate) const BOOL: &str = "@dra.bool";
    pub(crate) const SUM_INT: &str = "@dra.sum_int";
    pub(crate) const SUM_UINT: &str = "@dra.sum_uint";
    pub(crate) const SUM_DOUBLE: &str = "@dra.sum_double";
    /// 1.36's `includes`, limited to the longest list an attribute may hold.
    pub(crate) const INCLUDES_LIMITED: &str = "@dra.includes_limited";
    /// `string.indexOf(sub, offset)` and `lastIndexOf` as cel-go v0.26 (1.34
    /// to 1.36) and v0.29 (1.37) have them.
    pub(crate) const INDEX_OF_V026: &str = "@dra.indexOf_v026";
    pub(crate) const INDEX_OF_V029: &str = "@dra.indexOf_v029";
    pub(crate) const LAST_INDEX_OF_V026: &str = "@dra.lastIndexOf_v026";
    pub(crate) const LAST_INDEX_OF_V029: &str = "@dra.lastIndexOf_v029";
}

/// The environment, built once.
pub(crate) static ENV: LazyLock<Arc<Env>> =
    LazyLock::new(|| Arc::new(environment().unwrap_or_else(|e| panic!("building the selector environment: {e}"))));

fn environment() -> Result<Env, DeclarationError> {
    let mut env = Env::default().with_stdlib();
    // cel-go keeps the last of repeated map keys
    env.set_error_on_duplicate_map_keys(false);
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    add_macros(&mut env)?;
    add_quantity(&mut env)?;
    add_semver(&mut env)?;
    add_lists(&mut env)?;
    add_regex(&mut env)?;
    add_go_semantics(&mut env)?;
    Ok(env)
}

// ---- macros ---------------------------------------------------------------

fn add_macros(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::global("has", 1, |h, _, args| has_macro(h, args)))?;
    env.add_macro(Macro::receiver("all", 2, |h, t, args| {
        quantifier(h, t, args, Quantifier::All)
    }))?;
    env.add_macro(Macro::receiver("exists", 2, |h, t, args| {
        quantifier(h, t, args, Quantifier::Exists)
    }))?;
    env.add_macro(Macro::receiver("exists_one", 2, |h, t, args| {
        quantifier(h, t, args, Quantifier::ExistsOne)
    }))?;
    env.add_macro(Macro::receiver("map", 2, map_macro))?;
    env.add_macro(Macro::receiver("map", 3, map_macro))?;
    env.add_macro(Macro::receiver("filter", 2, filter_macro))?;
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    for (name, counts) in [
        ("all", &[3][..]),
        ("exists", &[3]),
        ("existsOne", &[3]),
        ("exists_one", &[3]),
        ("transformList", &[3, 4]),
        ("transformMap", &[3, 4]),
        ("transformMapEntry", &[3, 4]),
    ] {
        for &count in counts {
            env.add_macro(Macro::receiver(name, count, move |h, t, args| {
                two_variable_macro(h, t, args, name)
            }))?;
        }
    }
    Ok(())
}

const ACCUMULATOR: &str = "@result";

fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

fn call(h: &mut MacroExprHelper<'_>, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: name.to_owned(),
        target: None,
        args,
    }))
}

fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

fn simple_name(h: &MacroExprHelper<'_>, e: &IdedExpr) -> Result<String, ParseError> {
    match &e.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(e.id, "argument must be a simple name")),
    }
}

fn has_macro(h: &mut MacroExprHelper<'_>, args: &mut Vec<IdedExpr>) -> Result<Option<IdedExpr>, ParseError> {
    let arg = args.remove(0);
    match arg.expr {
        Expr::Select(mut select) => {
            select.test = true;
            Ok(Some(h.next_expr(Expr::Select(select))))
        }
        _ => Err(h.new_error(arg.id, "invalid argument to has() macro")),
    }
}

#[derive(Clone, Copy)]
enum Quantifier {
    All,
    Exists,
    ExistsOne,
}

/// cel-go's `MakeAll`, `MakeExists`, `MakeExistsOne`.
fn quantifier(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    kind: Quantifier,
) -> Result<Option<IdedExpr>, ParseError> {
    let var = simple_name(h, &args[0])?;
    let predicate = args.remove(1);
    args.clear();
    let Some(range) = target.take() else {
        return Err(h.new_error(predicate.id, "a receiver macro without a target"));
    };
    let (init, cond, step, result) = match kind {
        Quantifier::All => {
            let init = literal(h, LiteralValue::Boolean(true.into()));
            let accu = ident(h, ACCUMULATOR);
            let cond = call(h, "@not_strictly_false", vec![accu]);
            let accu = ident(h, ACCUMULATOR);
            let step = call(h, "_&&_", vec![accu, predicate]);
            (init, cond, step, ident(h, ACCUMULATOR))
        }
        Quantifier::Exists => {
            let init = literal(h, LiteralValue::Boolean(false.into()));
            let accu = ident(h, ACCUMULATOR);
            let not = call(h, "!_", vec![accu]);
            let cond = call(h, "@not_strictly_false", vec![not]);
            let accu = ident(h, ACCUMULATOR);
            let step = call(h, "_||_", vec![accu, predicate]);
            (init, cond, step, ident(h, ACCUMULATOR))
        }
        Quantifier::ExistsOne => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            let accu = ident(h, ACCUMULATOR);
            let one = literal(h, LiteralValue::Int(1.into()));
            let plus = call(h, "_+_", vec![accu, one]);
            let accu = ident(h, ACCUMULATOR);
            let step = call(h, "_?_:_", vec![predicate, plus, accu]);
            let accu = ident(h, ACCUMULATOR);
            let one = literal(h, LiteralValue::Int(1.into()));
            (init, cond, step, call(h, "_==_", vec![accu, one]))
        }
    };
    Ok(Some(comprehension(h, range, var, init, cond, step, result)))
}

fn comprehension(
    h: &mut MacroExprHelper<'_>,
    range: IdedExpr,
    var: String,
    init: IdedExpr,
    cond: IdedExpr,
    step: IdedExpr,
    result: IdedExpr,
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: var,
        iter_var2: None,
        accu_var: ACCUMULATOR.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })))
}

/// cel-go's `MakeMap` (`map(x, f)` and `map(x, p, f)`).
fn map_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let var = simple_name(h, &args[0])?;
    let mapped = args.pop().unwrap_or_default();
    let filter = (args.len() == 2).then(|| args.remove(1));
    args.clear();
    let Some(range) = target.take() else {
        return Err(h.new_error(mapped.id, "a receiver macro without a target"));
    };
    let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(true.into()));
    let accu = ident(h, ACCUMULATOR);
    let item = h.next_expr(Expr::List(ListExpr::new(vec![mapped])));
    let mut step = call(h, "_+_", vec![accu, item]);
    if let Some(filter) = filter {
        let accu = ident(h, ACCUMULATOR);
        step = call(h, "_?_:_", vec![filter, step, accu]);
    }
    let result = ident(h, ACCUMULATOR);
    Ok(Some(comprehension(h, range, var, init, cond, step, result)))
}

/// cel-go's `MakeFilter`.
fn filter_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let var = simple_name(h, &args[0])?;
    let predicate = args.remove(1);
    let var_expr = args.remove(0);
    let Some(range) = target.take() else {
        return Err(h.new_error(predicate.id, "a receiver macro without a target"));
    };
    let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(true.into()));
    let accu = ident(h, ACCUMULATOR);
    let item = h.next_expr(Expr::List(ListExpr::new(vec![var_expr])));
    let append = call(h, "_+_", vec![accu, item]);
    let accu = ident(h, ACCUMULATOR);
    let step = call(h, "_?_:_", vec![predicate, append, accu]);
    let result = ident(h, ACCUMULATOR);
    Ok(Some(comprehension(h, range, var, init, cond, step, result)))
}

/// cel-go's `cel.bind(name, init, expr)` (`ext.Bindings`): a comprehension
/// over nothing whose accumulator is the bound name.
fn bind_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let Expr::Ident(name) = &args[0].expr else {
        return Err(h.new_error(args[0].id, "cel.bind() variable names must be simple identifiers"));
    };
    let name = name.clone();
    let body = args.remove(2);
    let init = args.remove(1);
    args.clear();
    target.take();
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(false.into()));
    let step = ident(h, &name);
    Ok(Some(h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name,
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: body,
    })))))
}

/// The two-variable forms, kept as a marker the checker reports: the
/// macro's name, then its arguments.
fn two_variable_macro(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    name: &str,
) -> Result<Option<IdedExpr>, ParseError> {
    simple_name(h, &args[0])?;
    simple_name(h, &args[1])?;
    let kind = literal(h, LiteralValue::String(CelString::from(name.to_owned())));
    let args = std::iter::once(kind).chain(std::mem::take(args)).collect();
    Ok(Some(h.next_expr(Expr::Call(CallExpr {
        func_name: TWO_VARIABLE_MARKER.to_owned(),
        target: target.take().map(Box::new),
        args,
    }))))
}

// ---- helpers ----------------------------------------------------------------

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn no_overload(function: &str, args: &[CowVal<'_, '_>]) -> ExecutionError {
    ExecutionError::no_such_overload(function, args.iter().map(|a| a.get_type().name().to_owned()).collect())
}

fn failed(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn owned<'b, 'v>(v: impl Val + 'v) -> CowVal<'b, 'v> {
    CowVal::Owned(Box::new(v))
}

fn boolean<'b, 'v>(b: bool) -> CowVal<'b, 'v> {
    owned(CelBool::from(b))
}

fn quantity_arg<'a>(f: &str, args: &'a [CowVal<'_, '_>], i: usize) -> Result<&'a QuantityVal, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<QuantityVal>())
        .ok_or_else(|| no_overload(f, args))
}

fn semver_arg<'a>(f: &str, args: &'a [CowVal<'_, '_>], i: usize) -> Result<&'a Semver, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<SemverVal>())
        .map(|s| &s.0)
        .ok_or_else(|| no_overload(f, args))
}

fn string_arg<'a>(f: &str, args: &'a [CowVal<'_, '_>], i: usize) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(CelString::inner)
        .ok_or_else(|| no_overload(f, args))
}

fn int_arg(f: &str, args: &[CowVal<'_, '_>], i: usize) -> Result<i64, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelInt>())
        .map(|i| *i.inner())
        .ok_or_else(|| no_overload(f, args))
}

fn bool_arg(f: &str, args: &[CowVal<'_, '_>], i: usize) -> Result<bool, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelBool>())
        .map(|b| *b.inner())
        .ok_or_else(|| no_overload(f, args))
}

/// The elements of a list argument, borrowed.
fn elements<'b, 'v>(f: &str, args: &'b [CowVal<'_, 'v>], i: usize) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let list = args.get(i).ok_or_else(|| no_overload(f, args))?;
    if list.get_type().name() != "list" {
        return Err(no_overload(f, args));
    }
    let mut items = list.as_iterable().ok_or_else(|| no_overload(f, args))?.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

fn ordering_int(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

// ---- quantities ---------------------------------------------------------------

fn add_quantity(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || QUANTITY_TYPE.to_owned();
    env.add_overload("quantity", "dra_string_to_quantity", vec![STRING_TYPE], q_parse)?;
    env.add_overload("isQuantity", "dra_is_quantity_string", vec![STRING_TYPE], q_is)?;
    env.add_overload("sign", "dra_quantity_sign", vec![q()], q_sign)?;
    env.add_member_overload(
        "isGreaterThan",
        "dra_quantity_is_greater_than",
        q(),
        vec![q()],
        q_greater,
    )?;
    env.add_member_overload("isLessThan", "dra_quantity_is_less_than", q(), vec![q()], q_less)?;
    env.add_member_overload("compareTo", "dra_quantity_compare_to", q(), vec![q()], q_compare)?;
    env.add_member_overload("asApproximateFloat", "dra_quantity_get_float", q(), vec![], q_float)?;
    env.add_member_overload("asInteger", "dra_quantity_get_int", q(), vec![], q_int)?;
    env.add_member_overload("isInteger", "dra_quantity_is_integer", q(), vec![], q_is_int)?;
    env.add_member_overload("add", "dra_quantity_add", q(), vec![q()], q_add)?;
    env.add_member_overload("add", "dra_quantity_add_int", q(), vec![INT_TYPE], q_add)?;
    env.add_member_overload("sub", "dra_quantity_sub", q(), vec![q()], q_sub)?;
    env.add_member_overload("sub", "dra_quantity_sub_int", q(), vec![INT_TYPE], q_sub)?;
    Ok(())
}

fn q_parse<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("quantity", &args, 0)?;
    let quantity = Quantity::parse(text).map_err(|e| failed("quantity", e))?;
    Ok(owned(QuantityVal {
        quantity,
        computed: false,
    }))
}

fn q_is<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(Quantity::parse(string_arg("isQuantity", &args, 0)?).is_ok()))
}

fn q_sign<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(quantity_arg("sign", &args, 0)?.quantity.sign())))
}

fn q_cmp(f: &str, args: &[CowVal<'_, '_>]) -> Result<Ordering, ExecutionError> {
    Ok(quantity_arg(f, args, 0)?
        .quantity
        .cmp(quantity_arg(f, args, 1)?.quantity))
}

fn q_greater<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(q_cmp("isGreaterThan", &args)? == Ordering::Greater))
}

fn q_less<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(q_cmp("isLessThan", &args)? == Ordering::Less))
}

fn q_compare<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(ordering_int(q_cmp("compareTo", &args)?))))
}

fn q_float<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let q = quantity_arg("asApproximateFloat", &args, 0)?;
    Ok(owned(CelDouble::from(q.quantity.as_approximate_f64())))
}

fn q_int<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let q = quantity_arg("asInteger", &args, 0)?;
    let value = q
        .quantity
        .as_i64()
        .ok_or_else(|| failed("asInteger", "cannot convert value to integer"))?;
    Ok(owned(CelInt::from(value)))
}

fn q_is_int<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let q = quantity_arg("isInteger", &args, 0)?;
    Ok(boolean(q.quantity.as_i64().is_some()))
}

/// The second operand of `add` and `sub`: a quantity, or an integer as Go's
/// `NewQuantity(v, DecimalExponent)`.
fn q_operand(f: &str, args: &[CowVal<'_, '_>]) -> Result<Quantity, ExecutionError> {
    if let Some(q) = args.get(1).and_then(|a| a.downcast_ref::<QuantityVal>()) {
        return Ok(q.quantity);
    }
    let value = int_arg(f, args, 1)?;
    Ok(Quantity::Small { value, scale: 0 })
}

fn q_add<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let q = quantity_arg("add", &args, 0)?.quantity;
    let sum = q.add(q_operand("add", &args)?).map_err(|e| failed("add", e))?;
    Ok(owned(QuantityVal {
        quantity: sum,
        computed: true,
    }))
}

fn q_sub<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let q = quantity_arg("sub", &args, 0)?.quantity;
    let diff = q.sub(q_operand("sub", &args)?).map_err(|e| failed("sub", e))?;
    Ok(owned(QuantityVal {
        quantity: diff,
        computed: true,
    }))
}

// ---- semantic versions ----------------------------------------------------------

fn add_semver(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || SEMVER_TYPE.to_owned();
    env.add_overload("semver", "dra_string_to_semver", vec![STRING_TYPE], v_parse)?;
    env.add_overload(
        "semver",
        "dra_string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        v_parse,
    )?;
    env.add_overload("isSemver", "dra_is_semver_string", vec![STRING_TYPE], v_is)?;
    env.add_overload(
        "isSemver",
        "dra_is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        v_is,
    )?;
    env.add_member_overload("isGreaterThan", "dra_semver_is_greater_than", s(), vec![s()], v_greater)?;
    env.add_member_overload("isLessThan", "dra_semver_is_less_than", s(), vec![s()], v_less)?;
    env.add_member_overload("compareTo", "dra_semver_compare_to", s(), vec![s()], v_compare)?;
    env.add_member_overload("major", "dra_semver_major", s(), vec![], v_major)?;
    env.add_member_overload("minor", "dra_semver_minor", s(), vec![], v_minor)?;
    env.add_member_overload("patch", "dra_semver_patch", s(), vec![], v_patch)?;
    Ok(())
}

fn parse_version(f: &str, args: &[CowVal<'_, '_>]) -> Result<Result<Semver, String>, ExecutionError> {
    let text = string_arg(f, args, 0)?;
    let normalize = if args.len() > 1 { bool_arg(f, args, 1)? } else { false };
    Ok(if normalize {
        Semver::parse_normalized(text)
    } else {
        Semver::parse(text)
    }
    .map_err(|e| e.to_string()))
}

fn v_parse<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let version = parse_version("semver", &args)?.map_err(|e| failed("semver", e))?;
    Ok(owned(SemverVal(version)))
}

fn v_is<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(parse_version("isSemver", &args)?.is_ok()))
}

fn v_cmp(f: &str, args: &[CowVal<'_, '_>]) -> Result<Ordering, ExecutionError> {
    Ok(semver_arg(f, args, 0)?.compare(semver_arg(f, args, 1)?))
}

fn v_greater<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(v_cmp("isGreaterThan", &args)? == Ordering::Greater))
}

fn v_less<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(v_cmp("isLessThan", &args)? == Ordering::Less))
}

fn v_compare<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(ordering_int(v_cmp("compareTo", &args)?))))
}

fn v_number(f: &str, args: &[CowVal<'_, '_>], pick: fn(&Semver) -> u64) -> Result<i64, ExecutionError> {
    // Go converts with int64(v.Major), wrapping
    Ok(pick(semver_arg(f, args, 0)?) as i64)
}

fn v_major<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(v_number("major", &args, |s| s.major)?)))
}

fn v_minor<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(v_number("minor", &args, |s| s.minor)?)))
}

fn v_patch<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(v_number("patch", &args, |s| s.patch)?)))
}

// ---- lists, sets, optionals ---------------------------------------------------------------

/// The longest list an attribute holds (`ResourceSliceMaxAttributeValuesPerDevice`).
const MAX_ATTRIBUTE_VALUES: usize = 16;

fn add_lists(env: &mut Env) -> Result<(), DeclarationError> {
    let list = || LIST_TYPE;
    env.add_member_overload("isSorted", "dra_list_is_sorted", list(), vec![], l_is_sorted)?;
    env.add_member_overload(rewritten::SUM_INT, "dra_list_sum_int", list(), vec![], l_sum_int)?;
    env.add_member_overload(rewritten::SUM_UINT, "dra_list_sum_uint", list(), vec![], l_sum_uint)?;
    env.add_member_overload(
        rewritten::SUM_DOUBLE,
        "dra_list_sum_double",
        list(),
        vec![],
        l_sum_double,
    )?;
    env.add_member_overload("sum", "dra_list_sum", list(), vec![], l_sum_int)?;
    env.add_member_overload("max", "dra_list_max", list(), vec![], l_max)?;
    env.add_member_overload("min", "dra_list_min", list(), vec![], l_min)?;
    env.add_member_overload("indexOf", "dra_list_index_of", list(), vec![DYN_TYPE], l_index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "dra_list_last_index_of",
        list(),
        vec![DYN_TYPE],
        l_last_index_of,
    )?;
    env.add_member_overload("includes", "dra_includes", DYN_TYPE, vec![DYN_TYPE], l_includes)?;
    env.add_member_overload(
        rewritten::INCLUDES_LIMITED,
        "dra_includes_limited",
        DYN_TYPE,
        vec![DYN_TYPE],
        l_includes_limited,
    )?;
    env.add_member_overload("first", "dra_list_first", list(), vec![], l_first)?;
    env.add_member_overload("last", "dra_list_last", list(), vec![], l_last)?;
    env.add_member_overload("unwrapOpt", "dra_list_unwrap_opt", list(), vec![], l_unwrap)?;
    env.add_overload("optional.unwrap", "dra_optional_unwrap", vec![list()], l_unwrap)?;
    env.add_overload("sets.contains", "dra_sets_contains", vec![list(), list()], s_contains)?;
    env.add_overload(
        "sets.equivalent",
        "dra_sets_equivalent",
        vec![list(), list()],
        s_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "dra_sets_intersects",
        vec![list(), list()],
        s_intersects,
    )?;
    Ok(())
}

fn compare(a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| ExecutionError::no_such_overload("compare", vec![a.get_type().name().to_owned()]))?
        .compare(b)
}

fn l_is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("isSorted", &args, 0)?;
    for pair in items.windows(2) {
        if compare(pair[0], pair[1])? == Ordering::Greater {
            return Ok(boolean(false));
        }
    }
    if let Some(last) = items.last() {
        compare(*last, *last)?;
    }
    Ok(boolean(true))
}

fn sum_from<'b, 'v>(args: &Args<'b, 'v>, zero: Box<dyn Val + 'v>) -> Out<'b, 'v> {
    let items = elements("sum", args, 0)?;
    let mut acc: Box<dyn Val + 'v> = zero;
    for item in items {
        let next = acc
            .as_adder()
            .ok_or_else(|| ExecutionError::no_such_overload("sum", vec![acc.get_type().name().to_owned()]))?
            .add(item)?
            .into_owned();
        acc = next;
    }
    Ok(CowVal::Owned(acc))
}

fn l_sum_int<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    sum_from(&args, Box::new(CelInt::from(0)))
}

fn l_sum_uint<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    sum_from(&args, Box::new(CelUInt::from(0)))
}

fn l_sum_double<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    sum_from(&args, Box::new(CelDouble::from(0.0)))
}

/// The element `prefer` keeps ahead of the others (Go's `cmp`).
fn extreme<'b, 'v>(f: &str, args: &Args<'b, 'v>, replace_when: Ordering) -> Out<'b, 'v> {
    let items = elements(f, args, 0)?;
    let mut best: Option<&(dyn Val + 'v)> = None;
    for item in items {
        best = Some(match best {
            None => {
                item.as_comparer().ok_or_else(|| no_overload(f, args))?;
                item
            }
            Some(b) if compare(b, item)? == replace_when => item,
            Some(b) => b,
        });
    }
    match best {
        Some(b) => Ok(CowVal::Owned(b.clone_as_boxed())),
        None => Err(failed(f, format!("{f} called on empty list"))),
    }
}

fn l_max<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme("max", &args, Ordering::Less)
}

fn l_min<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme("min", &args, Ordering::Greater)
}

fn l_index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("indexOf", &args, 0)?;
    let index = items.iter().position(|i| i.equals(args[1].as_ref()));
    Ok(owned(CelInt::from(index.map_or(-1, |i| i as i64))))
}

fn l_last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("lastIndexOf", &args, 0)?;
    let index = items.iter().rposition(|i| i.equals(args[1].as_ref()));
    Ok(owned(CelInt::from(index.map_or(-1, |i| i as i64))))
}

fn includes(args: &Args<'_, '_>, limit: Option<usize>) -> Result<bool, ExecutionError> {
    let target = &args[0];
    let arg = args[1].as_ref();
    if target.get_type().name() == "list" {
        let items = elements("includes", args, 0)?;
        for (i, item) in items.iter().enumerate() {
            if limit.is_some_and(|l| i >= l) {
                return Err(failed(
                    "includes",
                    format!("'includes' function cannot be applied to lists longer than {MAX_ATTRIBUTE_VALUES} values"),
                ));
            }
            if go_equal(*item, arg).unwrap_or(false) {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    Ok(go_equal(target.as_ref(), arg).unwrap_or(false))
}

fn l_includes<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(includes(&args, None)?))
}

fn l_includes_limited<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(includes(&args, Some(MAX_ATTRIBUTE_VALUES))?))
}

fn l_first<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("first", &args, 0)?;
    Ok(owned(match items.first() {
        Some(v) => CelOptional::of(v.clone_as_boxed()),
        None => CelOptional::none(),
    }))
}

fn l_last<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("last", &args, 0)?;
    Ok(owned(match items.last() {
        Some(v) => CelOptional::of(v.clone_as_boxed()),
        None => CelOptional::none(),
    }))
}

fn l_unwrap<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements("unwrapOpt", &args, 0)?;
    let mut out: Vec<Box<dyn Val + 'v>> = Vec::new();
    for item in items {
        let opt = item
            .downcast_ref::<CelOptional>()
            .ok_or_else(|| no_overload("unwrapOpt", &args))?;
        if let Some(v) = opt.inner() {
            out.push(v.clone_as_boxed());
        }
    }
    Ok(owned(CelList::from(out)))
}

fn set_contains(a: &[&dyn Val], b: &[&dyn Val]) -> bool {
    b.iter().all(|x| a.iter().any(|y| y.equals(*x)))
}

fn s_contains<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        elements("sets.contains", &args, 0)?,
        elements("sets.contains", &args, 1)?,
    );
    Ok(boolean(set_contains(&a, &b)))
}

fn s_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        elements("sets.equivalent", &args, 0)?,
        elements("sets.equivalent", &args, 1)?,
    );
    Ok(boolean(set_contains(&a, &b) && set_contains(&b, &a)))
}

fn s_intersects<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        elements("sets.intersects", &args, 0)?,
        elements("sets.intersects", &args, 1)?,
    );
    Ok(boolean(b.iter().any(|x| a.iter().any(|y| y.equals(*x)))))
}

// ---- regular expressions ------------------------------------------------------------------

fn add_regex(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("find", "dra_string_find_string", STRING_TYPE, vec![STRING_TYPE], r_find)?;
    env.add_member_overload(
        "findAll",
        "dra_string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        r_find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "dra_string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        r_find_all,
    )?;
    Ok(())
}

/// Compiles a pattern as Go's `regexp.Compile` would accept it (the RE2
/// syntax the `regex` crate shares).
pub(crate) fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(pattern).map_err(|e| format!("error parsing regexp: {e}"))
}

fn r_find<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("find", &args, 0)?;
    let re = compile_regex(string_arg("find", &args, 1)?).map_err(|e| failed("find", format!("Illegal regex: {e}")))?;
    let found = re.find(text).map_or("", |m| m.as_str());
    Ok(owned(CelString::from(found.to_owned())))
}

fn r_find_all<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("findAll", &args, 0)?;
    let re = compile_regex(string_arg("findAll", &args, 1)?)
        .map_err(|e| failed("findAll", format!("Illegal regex: {e}")))?;
    let limit = if args.len() > 2 {
        int_arg("findAll", &args, 2)?
    } else {
        -1
    };
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(text)
        .take(take)
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val + 'v>)
        .collect();
    Ok(owned(CelList::from(found)))
}

// ---- Go's semantics ------------------------------------------------------------------------

fn add_go_semantics(env: &mut Env) -> Result<(), DeclarationError> {
    for (name, f) in [
        (
            rewritten::INDEX_OF_V026,
            g_index_of_v026 as cel::common::functions::Function,
        ),
        (rewritten::INDEX_OF_V029, g_index_of_v029),
        (rewritten::LAST_INDEX_OF_V026, g_last_index_of_v026),
        (rewritten::LAST_INDEX_OF_V029, g_last_index_of_v029),
    ] {
        env.add_member_overload(name, name, STRING_TYPE, vec![STRING_TYPE, INT_TYPE], f)?;
    }
    env.add_overload(rewritten::EQUALS, "dra_equals", vec![DYN_TYPE, DYN_TYPE], g_equals)?;
    env.add_overload(
        rewritten::NOT_EQUALS,
        "dra_not_equals",
        vec![DYN_TYPE, DYN_TYPE],
        g_not_equals,
    )?;
    env.add_overload(rewritten::HAS, "dra_has", vec![DYN_TYPE, STRING_TYPE], g_has)?;
    env.add_overload(rewritten::TICK, "dra_tick", vec![INT_TYPE, DYN_TYPE], g_tick)?;
    env.add_overload(rewritten::ADD, "dra_add", vec![DYN_TYPE, DYN_TYPE], g_add)?;
    env.add_member_overload(
        rewritten::REPLACE,
        "dra_replace",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE],
        g_replace,
    )?;
    env.add_member_overload(
        rewritten::REPLACE,
        "dra_replace_n",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE, INT_TYPE],
        g_replace,
    )?;
    env.add_overload(rewritten::IN, "dra_in", vec![DYN_TYPE, DYN_TYPE], g_in)?;
    env.add_overload(rewritten::IN_SET, "dra_in_set", vec![DYN_TYPE, DYN_TYPE], g_in_set)?;
    env.add_overload(
        rewritten::OPT_SELECT,
        "dra_opt_select",
        vec![DYN_TYPE, STRING_TYPE],
        g_opt_select,
    )?;
    env.add_overload(
        rewritten::OPT_INDEX,
        "dra_opt_index",
        vec![DYN_TYPE, DYN_TYPE],
        g_opt_index,
    )?;
    env.add_overload(
        rewritten::RANGE_V026,
        "dra_lists_range_v026",
        vec![INT_TYPE],
        g_range_v026,
    )?;
    env.add_overload(rewritten::INT, "dra_int", vec![DYN_TYPE], g_int)?;
    env.add_overload(rewritten::UINT, "dra_uint", vec![DYN_TYPE], g_uint)?;
    env.add_overload(rewritten::DOUBLE, "dra_double", vec![DYN_TYPE], g_double)?;
    env.add_overload(rewritten::STRING, "dra_string", vec![DYN_TYPE], g_string)?;
    env.add_overload(rewritten::BOOL, "dra_bool", vec![DYN_TYPE], g_bool)?;
    Ok(())
}

/// cel-go's `types.Equal`: `null` equals only `null`, otherwise the left
/// operand's `Equal`.
pub(crate) fn go_equal(a: &dyn Val, b: &dyn Val) -> Result<bool, ExecutionError> {
    let (a_null, b_null) = (
        a.downcast_ref::<CelNull>().is_some(),
        b.downcast_ref::<CelNull>().is_some(),
    );
    if a_null || b_null {
        return Ok(a_null == b_null);
    }
    val_equal(a, b)
}

/// A value's `Equal` in cel-go: a quantity or a version compares only with
/// its own kind and fails on anything else (a quantity made by `add`/`sub`
/// is not one on the right); lists and maps are equal unless an element
/// compares *false* (an element that fails to compare does not make them
/// unequal), a missing domain of a domain map reading as empty; otherwise
/// CEL's heterogeneous equality.
fn val_equal(a: &dyn Val, b: &dyn Val) -> Result<bool, ExecutionError> {
    let no_such_overload = || {
        ExecutionError::no_such_overload(
            "_==_",
            vec![a.get_type().name().to_owned(), b.get_type().name().to_owned()],
        )
    };
    if let Some(q) = a.downcast_ref::<QuantityVal>() {
        return match b.downcast_ref::<QuantityVal>() {
            Some(o) if !o.computed => Ok(q.quantity.cmp(o.quantity).is_eq()),
            _ => Err(no_such_overload()),
        };
    }
    if let Some(v) = a.downcast_ref::<SemverVal>() {
        return match b.downcast_ref::<SemverVal>() {
            Some(o) => Ok(v.0.compare(&o.0).is_eq()),
            None => Err(no_such_overload()),
        };
    }
    let a = unwrap_domain_map(a);
    match a.get_type().name() {
        "list" => {
            if b.get_type().name() != "list" {
                return Ok(false);
            }
            let (xs, ys) = (items(a), items(b));
            if xs.len() != ys.len() {
                return Ok(false);
            }
            Ok(!xs.iter().zip(&ys).any(|(x, y)| matches!(go_equal(*x, *y), Ok(false))))
        }
        "map" => {
            let (Some(sizer), Some(other), Some(other_size)) = (a.as_sizer(), b.as_indexer(), b.as_sizer()) else {
                return Ok(false);
            };
            if b.get_type().name() != "map" || *sizer.size().inner() != *other_size.size().inner() {
                return Ok(false);
            }
            let Some(this) = a.as_indexer() else {
                return Ok(false);
            };
            for key in items(a) {
                let (Ok(x), Ok(y)) = (this.get(key), other.get(key)) else {
                    return Ok(false);
                };
                if matches!(go_equal(x.as_ref(), y.as_ref()), Ok(false)) {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => Ok(a.equals(unwrap_domain_map(b))),
    }
}

/// The elements of a list, the keys of a map.
fn items<'b, 'v>(v: &'b (dyn Val + 'v)) -> Vec<&'b (dyn Val + 'v)> {
    let mut out = Vec::new();
    if let Some(iterable) = v.as_iterable() {
        let mut it = iterable.iter();
        while let Some(x) = it.next() {
            out.push(x);
        }
    }
    out
}

/// `x in container` in cel-go: a list holds `x` when `x.Equal(element)` is
/// true (a failing comparison is no match), a map its keys; anything else
/// fails.
fn contains(x: &dyn Val, container: &dyn Val) -> Result<bool, ExecutionError> {
    match container.get_type().name() {
        "list" => Ok(items(container)
            .into_iter()
            .any(|e| matches!(val_equal(x, e), Ok(true)))),
        "map" => Ok(container.as_container().is_some_and(|c| c.contains(x).unwrap_or(false))),
        _ => Err(ExecutionError::no_such_overload(
            "@in",
            vec![x.get_type().name().to_owned(), container.get_type().name().to_owned()],
        )),
    }
}

fn g_in<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(contains(args[0].as_ref(), args[1].as_ref())?))
}

/// `x in [constants]`, which cel-go plans as a lookup in a Go map of the
/// constants: a value Go cannot hash (a version, bytes) fails.
fn g_in_set<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let x = args[0].as_ref();
    if x.downcast_ref::<SemverVal>().is_some() || x.downcast_ref::<CelBytes>().is_some() {
        return Err(failed(
            "@in",
            format!(
                "internal error: runtime error: hash of unhashable type {}",
                x.get_type().name()
            ),
        ));
    }
    Ok(boolean(contains(x, args[1].as_ref())?))
}

/// `x.?f` on a value of no static type: a map's entry (a domain map has them
/// all), through an optional; a list cannot be asked; anything else has
/// none.
fn g_opt_select<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let field = CelString::from(string_arg("_?._", &args, 1)?.to_owned());
    opt_lookup(args[0].as_ref(), &field).map(owned)
}

/// `x[?k]` on a value of no static type.
fn g_opt_index<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    opt_lookup(args[0].as_ref(), args[1].as_ref()).map(owned)
}

fn opt_lookup<'v>(x: &(dyn Val + 'v), key: &dyn Val) -> Result<CelOptional<'v>, ExecutionError> {
    if let Some(opt) = x.downcast_ref::<CelOptional>() {
        return match opt.inner() {
            Some(inner) => opt_lookup(inner, key),
            None => Ok(CelOptional::none()),
        };
    }
    match x.get_type().name() {
        "map" => Ok(match x.as_indexer().map(|i| i.get(key)) {
            Some(Ok(v)) => CelOptional::of(v.into_owned()),
            _ => CelOptional::none(),
        }),
        "list" => {
            let numeric = key.downcast_ref::<CelInt>().is_some()
                || key.downcast_ref::<cel::common::types::CelUInt>().is_some()
                || key.downcast_ref::<CelDouble>().is_some();
            if !numeric {
                return Err(failed(
                    "_[?_]",
                    format!("unsupported index type '{}' in list", key.get_type().name()),
                ));
            }
            Ok(match x.as_indexer().map(|i| i.get(key)) {
                Some(Ok(v)) => CelOptional::of(v.into_owned()),
                _ => CelOptional::none(),
            })
        }
        _ => Ok(CelOptional::none()),
    }
}

fn g_equals<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(go_equal(args[0].as_ref(), args[1].as_ref())?))
}

/// cel-go's `!=` is true unless the operands are equal: where `==` fails,
/// `!=` holds.
fn g_not_equals<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(boolean(!go_equal(args[0].as_ref(), args[1].as_ref()).unwrap_or(false)))
}

/// `has(x.f)` for an `x` of no static type: a map has its keys (a domain
/// map every key), a list cannot be asked, anything else has no fields.
fn g_has<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let field = string_arg("has", &args, 1)?;
    has(args[0].as_ref(), field).map(boolean)
}

fn has(value: &dyn Val, field: &str) -> Result<bool, ExecutionError> {
    if let Some(opt) = value.downcast_ref::<CelOptional>() {
        return match opt.inner() {
            Some(inner) => has(inner, field),
            None => Ok(false),
        };
    }
    if value.downcast_ref::<DomainMap>().is_some() {
        return Ok(true);
    }
    if let Some(map) = value.downcast_ref::<CelMap>() {
        return Ok(map.as_indexer().is_some_and(|i| i.get(&CelString::from(field)).is_ok()));
    }
    if value.get_type().name() == "list" {
        return Err(failed("has", "unsupported index type 'string' in list"));
    }
    Ok(false)
}

fn conversion_error(from: &dyn Val, to: &str) -> ExecutionError {
    failed(
        to,
        format!("type conversion error from '{}' to '{to}'", from.get_type().name()),
    )
}

fn g_int<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let v = args[0].as_ref();
    let out = if let Some(i) = v.downcast_ref::<CelInt>() {
        *i.inner()
    } else if let Some(u) = v.downcast_ref::<CelUInt>() {
        i64::try_from(*u.inner()).map_err(|_| failed("int", "integer overflow"))?
    } else if let Some(d) = v.downcast_ref::<CelDouble>() {
        double_to_int(*d.inner()).ok_or_else(|| failed("int", "integer overflow"))?
    } else if let Some(s) = v.downcast_ref::<CelString>() {
        go_parse_int(s.inner()).ok_or_else(|| conversion_error(v, "int"))?
    } else {
        return Err(no_overload("int", &args));
    };
    Ok(owned(CelInt::from(out)))
}

/// cel-go's `doubleToInt64Checked`: truncation, refused at and beyond the
/// `int64` range and for NaN.
fn double_to_int(d: f64) -> Option<i64> {
    if d.is_nan() || d <= -9_223_372_036_854_775_808.0 || d >= 9_223_372_036_854_775_807.0 {
        return None;
    }
    Some(d.trunc() as i64)
}

fn go_parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn g_uint<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let v = args[0].as_ref();
    let overflow = || failed("uint", "unsigned integer overflow");
    let out = if let Some(u) = v.downcast_ref::<CelUInt>() {
        *u.inner()
    } else if let Some(i) = v.downcast_ref::<CelInt>() {
        u64::try_from(*i.inner()).map_err(|_| overflow())?
    } else if let Some(d) = v.downcast_ref::<CelDouble>() {
        let d = *d.inner();
        if d.is_nan() || !(0.0..18_446_744_073_709_551_615.0).contains(&d) {
            return Err(overflow());
        }
        d.trunc() as u64
    } else if let Some(s) = v.downcast_ref::<CelString>() {
        let text = s.inner();
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(conversion_error(v, "uint"));
        }
        text.parse().map_err(|_| conversion_error(v, "uint"))?
    } else {
        return Err(no_overload("uint", &args));
    };
    Ok(owned(CelUInt::from(out)))
}

fn g_double<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let v = args[0].as_ref();
    let out = if let Some(d) = v.downcast_ref::<CelDouble>() {
        *d.inner()
    } else if let Some(i) = v.downcast_ref::<CelInt>() {
        *i.inner() as f64
    } else if let Some(u) = v.downcast_ref::<CelUInt>() {
        *u.inner() as f64
    } else if let Some(s) = v.downcast_ref::<CelString>() {
        go_parse_float(s.inner()).ok_or_else(|| conversion_error(v, "double"))?
    } else {
        return Err(no_overload("double", &args));
    };
    Ok(owned(CelDouble::from(out)))
}

/// Go's `strconv.ParseFloat(s, 64)`: decimal or hexadecimal (`0x1p3`)
/// floating point with underscores between digits, or the infinities and
/// NaN by name; a finite number too large for a double is refused.
fn go_parse_float(s: &str) -> Option<f64> {
    let (sign, body) = match s.as_bytes().first() {
        Some(b'+') => (1.0, &s[1..]),
        Some(b'-') => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(sign * f64::INFINITY);
    }
    if lower == "nan" {
        return (body.len() == s.len()).then_some(f64::NAN);
    }
    if !go_underscores_ok(s) {
        return None;
    }
    let body: String = body.chars().filter(|&c| c != '_').collect();
    let value = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(hex) => parse_hex_float(hex)?,
        None => {
            let (mantissa, exponent) = match body.find(['e', 'E']) {
                Some(i) => (&body[..i], Some(&body[i + 1..])),
                None => (&body[..], None),
            };
            let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            let digits_ok = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
            let exponent_ok = exponent.is_none_or(|e| {
                let e = e.strip_prefix(['+', '-']).unwrap_or(e);
                !e.is_empty() && digits_ok(e)
            });
            if int.len() + frac.len() == 0 || !digits_ok(int) || !digits_ok(frac) || !exponent_ok {
                return None;
            }
            body.parse::<f64>().ok()?
        }
    };
    value.is_finite().then_some(sign * value)
}

/// Go's `underscoreOK`: underscores only between digits, or between a base
/// prefix and a digit.
fn go_underscores_ok(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
    let hex = s.len() >= 2 && s[0] == b'0' && matches!(s[1] | 0x20, b'x' | b'b' | b'o');
    let is_hex = hex && (s[1] | 0x20) == b'x';
    let (mut saw, start) = if hex { (b'0', 2) } else { (b'^', 0) };
    for &c in &s[start..] {
        if c.is_ascii_digit() || is_hex && c.is_ascii_hexdigit() {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// A hexadecimal float after its `0x`: hex digits with an optional point,
/// then a binary exponent `p±n`, which Go requires.
fn parse_hex_float(text: &str) -> Option<f64> {
    let (mantissa, exponent) = text.split_once(['p', 'P'])?;
    let exponent: i64 = {
        let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        exponent.parse().unwrap_or(if exponent.starts_with('-') {
            i64::MIN / 2
        } else {
            i64::MAX / 2
        })
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.len() + frac.len() == 0 {
        return None;
    }
    let (mut value, mut kept, mut sticky, mut shift) = (0u64, 0u32, false, 0i64);
    for (i, c) in int.chars().chain(frac.chars()).enumerate() {
        let digit = u64::from(c.to_digit(16)?);
        if i >= int.len() {
            shift -= 4;
        }
        if kept < 16 {
            if value != 0 || digit != 0 {
                kept += 1;
            }
            value = value * 16 + digit;
        } else {
            shift += 4;
            sticky |= digit != 0;
        }
    }
    // rounding to odd keeps the one rounding to a double correct
    let value = (value | u64::from(sticky)) as f64;
    // in two steps, each power of two exact
    let scale = exponent.saturating_add(shift).clamp(-4000, 4000) as i32;
    Some(value * 2f64.powi(scale / 2) * 2f64.powi(scale - scale / 2))
}

fn g_string<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let v = args[0].as_ref();
    let out = if let Some(s) = v.downcast_ref::<CelString>() {
        s.inner().to_owned()
    } else if let Some(b) = v.downcast_ref::<CelBool>() {
        b.inner().to_string()
    } else if let Some(i) = v.downcast_ref::<CelInt>() {
        i.inner().to_string()
    } else if let Some(u) = v.downcast_ref::<CelUInt>() {
        u.inner().to_string()
    } else if let Some(d) = v.downcast_ref::<CelDouble>() {
        go_format_float(*d.inner())
    } else if let Some(b) = v.downcast_ref::<CelBytes>() {
        String::from_utf8(b.inner().to_vec())
            .map_err(|_| failed("string", "invalid UTF-8 in bytes, cannot convert to string"))?
    } else {
        return Err(no_overload("string", &args));
    };
    Ok(owned(CelString::from(out)))
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits that
/// read back, in `%e` form when the exponent is below -4 or at least 6.
pub(crate) fn go_format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: d[.ddd]e[-]x
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let n = digits.len() as i32;
    let body = if exp < 0 {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if exp + 1 >= n {
        format!("{digits}{}", "0".repeat((exp + 1 - n) as usize))
    } else {
        let (int, frac) = digits.split_at((exp + 1) as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

fn g_bool<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let v = args[0].as_ref();
    let out = if let Some(b) = v.downcast_ref::<CelBool>() {
        *b.inner()
    } else if let Some(s) = v.downcast_ref::<CelString>() {
        match s.inner() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => return Err(conversion_error(v, "bool")),
        }
    } else {
        return Err(no_overload("bool", &args));
    };
    Ok(owned(CelBool::from(out)))
}

/// `str.indexOf(sub, offset)`: positions in code points. An offset past the
/// end finds nothing (-1); a negative one fails; the empty string is found
/// at the offset (cel-go v0.26: whatever the offset; v0.29: a negative one
/// fails, one past the end gives the end).
fn index_of(args: &[CowVal<'_, '_>], v029: bool, last: bool) -> Result<i64, ExecutionError> {
    let f = if last { "lastIndexOf" } else { "indexOf" };
    let text: Vec<char> = string_arg(f, args, 0)?.chars().collect();
    let sub: Vec<char> = string_arg(f, args, 1)?.chars().collect();
    let offset = int_arg(f, args, 2)?;
    let out_of_range = || failed(f, format!("index out of range: {offset}"));
    let len = text.len() as i64;
    if sub.is_empty() {
        if !v029 {
            return Ok(offset);
        }
        if offset < 0 {
            return Err(out_of_range());
        }
        return Ok(offset.min(len));
    }
    if offset < 0 {
        return Err(out_of_range());
    }
    if offset >= len {
        return Ok(-1);
    }
    let at = |i: usize| text[i..].starts_with(&sub);
    let offset = offset as usize;
    let found = if last {
        let start = offset.min(text.len().saturating_sub(sub.len()));
        (0..=start).rev().find(|&i| i + sub.len() <= text.len() && at(i))
    } else {
        (offset..text.len()).find(|&i| at(i))
    };
    Ok(found.map_or(-1, |i| i as i64))
}

fn g_index_of_v026<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(index_of(&args, false, false)?)))
}

fn g_index_of_v029<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(index_of(&args, true, false)?)))
}

fn g_last_index_of_v026<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(index_of(&args, false, true)?)))
}

fn g_last_index_of_v029<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    Ok(owned(CelInt::from(index_of(&args, true, true)?)))
}

/// The most elements `lists.range` makes here (cel-go v0.29's limit, which
/// v0.26 lacks: beyond it, v0.26 would build the list).
const MAX_RANGE: i64 = 1_000_000;

fn g_range_v026<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let n = int_arg("lists.range", &args, 0)?.max(0);
    if n > MAX_RANGE {
        return Err(failed(
            "lists.range",
            format!("lists.range: size {n} exceeds what topoalign builds ({MAX_RANGE})"),
        ));
    }
    let items: Vec<Box<dyn Val + 'v>> = (0..n).map(|i| Box::new(CelInt::from(i)) as Box<dyn Val + 'v>).collect();
    Ok(owned(CelList::from(items)))
}

// ---- evaluation cost ---------------------------------------------------------------------

/// The scheduler's runtime cost limit for a selector
/// (`resourceapi.CELSelectorExpressionMaxCost`).
pub(crate) const COST_LIMIT: u64 = 1_000_000;

thread_local! {
    /// What the evaluation running on this thread has spent.
    static SPENT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Starts a new evaluation's account.
pub(crate) fn reset_cost() {
    SPENT.with(|s| s.set(0));
}

/// Charges `units`: past the limit the evaluation fails, as cel-go's cost
/// tracker stops it. The charges approximate cel-go's (a comprehension
/// iteration costs its loop bookkeeping and the nodes it evaluates; building
/// a string, bytes or list costs a tenth of its size), so the two refuse the
/// same runaway selectors, not always at the same iteration; what matters
/// here is that no selector runs away.
fn charge(units: u64) -> Result<(), ExecutionError> {
    SPENT.with(|s| {
        let spent = s.get().saturating_add(units);
        s.set(spent);
        if spent > COST_LIMIT {
            Err(failed("cost", "operation cancelled: actual cost limit exceeded"))
        } else {
            Ok(())
        }
    })
}

fn size_cost(len: usize) -> u64 {
    (len as u64).div_ceil(10)
}

fn g_tick<'b, 'v>(mut args: Args<'b, 'v>) -> Out<'b, 'v> {
    let weight = int_arg("tick", &args, 0)?;
    charge(u64::try_from(weight).unwrap_or(0))?;
    args.pop().ok_or_else(|| failed("tick", "no value"))
}

fn g_add<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (args[0].as_ref(), args[1].as_ref());
    let built = match (a.get_type().name(), b.get_type().name()) {
        ("string", "string") => a
            .downcast_ref::<CelString>()
            .zip(b.downcast_ref::<CelString>())
            .map(|(x, y)| x.inner().len() + y.inner().len()),
        ("bytes", "bytes") => a
            .downcast_ref::<CelBytes>()
            .zip(b.downcast_ref::<CelBytes>())
            .map(|(x, y)| x.inner().len() + y.inner().len()),
        ("list", "list") => Some(items(a).len() + items(b).len()),
        _ => None,
    };
    if let Some(len) = built {
        charge(size_cost(len))?;
    }
    let adder = a.as_adder().ok_or_else(|| {
        ExecutionError::no_such_overload(
            "_+_",
            vec![a.get_type().name().to_owned(), b.get_type().name().to_owned()],
        )
    })?;
    Ok(CowVal::Owned(adder.add(b)?.into_owned()))
}

/// Go's `strings.Replace(s, old, new, n)` (all when `n` is negative), the
/// size of the result charged before it is built.
fn g_replace<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("replace", &args, 0)?;
    let (from, to) = (string_arg("replace", &args, 1)?, string_arg("replace", &args, 2)?);
    let limit = if args.len() > 3 {
        int_arg("replace", &args, 3)?
    } else {
        -1
    };
    let found = if from.is_empty() {
        text.chars().count() + 1
    } else {
        text.matches(from).count()
    };
    let count = usize::try_from(limit).map_or(found, |n| found.min(n));
    let len = (text.len() + count * to.len()).saturating_sub(count * from.len());
    charge(size_cost(len))?;
    let out = match usize::try_from(limit) {
        Ok(n) => text.replacen(from, to, n),
        Err(_) => text.replace(from, to),
    };
    Ok(owned(CelString::from(out)))
}
